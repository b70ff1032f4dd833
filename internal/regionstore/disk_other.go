//go:build !unix

package regionstore

import "io/fs"

func diskBytes(st fs.FileInfo) int64 { return st.Size() }

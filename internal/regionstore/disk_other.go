//go:build !unix

package regionstore

import (
	"io/fs"

	"github.com/pdcgo/pdc/internal/vfs"
)

func diskBytes(st fs.FileInfo) int64 { return st.Size() }

func nextData(f vfs.File, off int64) (int64, error) { return vfs.SeekData(f, off) }

//go:build unix

package regionstore

import (
	"io/fs"
	"syscall"
)

// diskBytes is the space a file's blocks take, which for a sparse file is
// less than its size.
func diskBytes(st fs.FileInfo) int64 {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return sys.Blocks * 512
	}
	return st.Size()
}

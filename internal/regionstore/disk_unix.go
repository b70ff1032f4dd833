//go:build unix

package regionstore

import (
	"io/fs"
	"syscall"

	"github.com/pdcgo/pdc/internal/vfs"
)

// diskBytes is the space a file's blocks take, which for a sparse file is
// less than its size.
func diskBytes(st fs.FileInfo) int64 {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return sys.Blocks * 512
	}
	return st.Size()
}

// nextData returns the offset of the first byte at or after off that is not
// in a hole of f, or -1 if there is none, so that a walk over a sparse file
// skips what was never written. Where the file system cannot say, it
// returns off.
func nextData(f vfs.File, off int64) (int64, error) { return vfs.SeekData(f, off) }

//go:build unix

package regionstore

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
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
func nextData(f *os.File, off int64) (int64, error) {
	d, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
	switch {
	case err == nil:
		return d, nil
	case errors.Is(err, unix.ENXIO):
		return -1, nil
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.EOPNOTSUPP):
		return off, nil
	}
	return 0, err
}

package staging

import (
	"io/fs"
	"os"
	"strconv"
)

// The file errors staging makes itself quote their paths, as its own
// messages do: a path is a user's, and one with a newline in it printed
// as os's errors print it made a one-line error two lines, whose second
// read as a message of its own. They unwrap to the os package's errors,
// so errors.Is(err, fs.ErrNotExist) and errors.As to *fs.PathError or
// *os.LinkError hold as before.

// pathError is an *fs.PathError whose message quotes its path.
type pathError struct{ e *fs.PathError }

func (p *pathError) Error() string {
	return p.e.Op + " " + strconv.Quote(p.e.Path) + ": " + p.e.Err.Error()
}
func (p *pathError) Unwrap() error { return p.e }

// newPathError is &fs.PathError{Op: op, Path: path, Err: err}, its path
// quoted in its message.
func newPathError(op, path string, err error) error {
	return &pathError{&fs.PathError{Op: op, Path: path, Err: err}}
}

// linkError is an *os.LinkError whose message quotes its paths.
type linkError struct{ e *os.LinkError }

func (l *linkError) Error() string {
	return l.e.Op + " " + strconv.Quote(l.e.Old) + " " + strconv.Quote(l.e.New) + ": " + l.e.Err.Error()
}
func (l *linkError) Unwrap() error { return l.e }

// newLinkError is &os.LinkError{...}, its paths quoted in its message.
func newLinkError(op, oldpath, newpath string, err error) error {
	return &linkError{&os.LinkError{Op: op, Old: oldpath, New: newpath, Err: err}}
}

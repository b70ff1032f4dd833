package staging

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/vfs"
)

// MaxPathLen bounds a staged path, as PATH_MAX does.
const MaxPathLen = 4096

// metaDir is the consumer dir's own subdirectory: local copies' records and
// lock files. It cannot be staged.
const metaDir = ".pdc-stage"

// CheckRel checks a relative path as it travels in records: clean,
// slash-separated, inside its dir and not in the dir's own metadata.
func CheckRel(rel string) error {
	switch {
	case rel == "" || rel == ".":
		return fmt.Errorf("empty staged path: %w", pdc.ErrInvalid)
	case len(rel) > MaxPathLen:
		return fmt.Errorf("staged path of %d bytes is longer than %d: %w", len(rel), MaxPathLen, pdc.ErrInvalid)
	case strings.IndexByte(rel, 0) >= 0:
		return fmt.Errorf("staged path %q contains a NUL byte: %w", rel, pdc.ErrInvalid)
	case strings.HasPrefix(rel, "/"):
		return fmt.Errorf("staged path %q is absolute; records hold paths relative to the managed dirs: %w", rel, pdc.ErrInvalid)
	case filepath.ToSlash(filepath.Clean(rel)) != rel:
		return fmt.Errorf("staged path %q is not clean (want %q): %w", rel, filepath.ToSlash(filepath.Clean(rel)), pdc.ErrInvalid)
	case rel == ".." || strings.HasPrefix(rel, "../"):
		return fmt.Errorf("staged path %q leaves the managed dir: %w", rel, pdc.ErrPermission)
	case rel == metaDir || strings.HasPrefix(rel, metaDir+"/"):
		return fmt.Errorf("staged path %q is inside %q, which pdc keeps for itself: %w", rel, metaDir, pdc.ErrPermission)
	}
	return nil
}

// MaxNamespaceLen bounds a staging namespace's name.
const MaxNamespaceLen = 128

// CheckNamespace checks a staging namespace's name: "" is the default
// namespace; any other is 1 to MaxNamespaceLen letters, digits and
// ". _ - : + @", so that it is safe in a file name, a job script and a
// store key alike.
func CheckNamespace(ns string) error {
	if len(ns) > MaxNamespaceLen {
		return fmt.Errorf("staging namespace of %d bytes is longer than %d: %w", len(ns), MaxNamespaceLen, pdc.ErrInvalid)
	}
	for i := 0; i < len(ns); i++ {
		c := ns[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._-:+@", c) >= 0) {
			return fmt.Errorf("staging namespace %q: byte %q is not a letter, digit or one of . _ - : + @: %w", ns, c, pdc.ErrInvalid)
		}
	}
	return nil
}

// Dir is a managed directory: a producer or consumer dir.
type Dir struct {
	// Path is the directory as given, made absolute.
	Path string
	// Real is Path with its symlinks resolved: what paths are checked
	// against.
	Real string
	// FS holds the records of local copies (where the file system keeps no
	// extended attributes); nil means the operating system's.
	FS   vfs.FS
	kind string // "producer" or "consumer", for messages
	// memory: the dir is on tmpfs or ramfs, device dev; fsync there
	// does nothing, and files on that device skip it (see InMemory).
	memory bool
	dev    uint64
}

// OpenDir checks that dir exists (creating it when create is set) and
// resolves it. kind names it in messages ("producer" or "consumer").
func OpenDir(dir, kind string, create bool) (Dir, error) {
	if dir == "" {
		return Dir{}, fmt.Errorf("no %s dir: set PDC_STAGE_%s_DIR or pass one: %w", kind, strings.ToUpper(kind), pdc.ErrInvalid)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Dir{}, fmt.Errorf("%s dir %q: %w", kind, dir, err)
	}
	if create {
		if err := os.MkdirAll(abs, 0o700); err != nil {
			return Dir{}, fmt.Errorf("%s dir %q: %w", kind, abs, err)
		}
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Dir{}, fmt.Errorf("%s dir %q does not exist: %w", kind, abs, pdc.ErrNotFound)
		}
		return Dir{}, fmt.Errorf("%s dir %q: %w", kind, abs, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return Dir{}, fmt.Errorf("%s dir %q: %w", kind, abs, err)
	}
	if !st.IsDir() {
		return Dir{}, fmt.Errorf("%s dir %q is not a directory: %w", kind, abs, pdc.ErrInvalid)
	}
	d := Dir{Path: abs, Real: real, kind: kind}
	var fst unix.Statfs_t
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && unix.Statfs(real, &fst) == nil {
		d.memory = fst.Type == unix.TMPFS_MAGIC || fst.Type == unix.RAMFS_MAGIC
		d.dev = sys.Dev
	}
	return d, nil
}

// InMemory reports whether a file with stat st is on the dir's file
// system and that is tmpfs or ramfs, where fsync does nothing (node-local
// staging is often memory): a consume skips the fsyncs of such a file and
// its directory, four system calls of a small file's thirty. A file on
// another device (a mount inside the dir) is not.
func (d Dir) InMemory(st fs.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && d.memory && sys.Dev == d.dev
}

// Resolve maps a path given by a user, relative to d or absolute inside
// it, to its clean relative form and its absolute location under d.Real.
// It refuses a path that leaves d lexically (..), or through a symlink
// anywhere along it, including the last element.
func (d Dir) Resolve(path string) (rel, abs string, err error) {
	if path == "" {
		return "", "", fmt.Errorf("empty path: %w", pdc.ErrInvalid)
	}
	if strings.IndexByte(path, 0) >= 0 {
		return "", "", fmt.Errorf("path %q contains a NUL byte: %w", path, pdc.ErrInvalid)
	}
	p := path
	if filepath.IsAbs(p) {
		p = filepath.Clean(p)
		r, ok := within(d.Path, p)
		if !ok {
			r, ok = within(d.Real, p)
		}
		if !ok {
			return "", "", fmt.Errorf("path %q is outside the %s dir %q: %w", path, d.kind, d.Path, pdc.ErrPermission)
		}
		p = r
	}
	rel = filepath.ToSlash(filepath.Clean(p))
	if err := CheckRel(rel); err != nil {
		return "", "", fmt.Errorf("%s dir %q: %w", d.kind, d.Path, err)
	}
	abs = filepath.Join(d.Real, filepath.FromSlash(rel))
	if err := d.checkLinks(rel, abs); err != nil {
		return "", "", err
	}
	return rel, abs, nil
}

// checkLinks walks rel under d.Real, component by component, and checks
// that every symlink met on the way resolves inside d.Real: a symlink that
// points out is refused whether it names a directory along the path or the
// file itself, and so is a dangling one (what it will point at is not ours
// to decide). Components that do not exist yet end the walk.
func (d Dir) checkLinks(rel, abs string) error {
	cur := d.Real
	for part := range strings.SplitSeq(rel, "/") {
		next := filepath.Join(cur, part)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("path %q in the %s dir %q: %w", rel, d.kind, d.Path, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		real, err := filepath.EvalSymlinks(next)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("path %q in the %s dir %q goes through a dangling symlink: %w", rel, d.kind, d.Path, pdc.ErrPermission)
		}
		if err != nil {
			return fmt.Errorf("path %q in the %s dir %q: %w", rel, d.kind, d.Path, err)
		}
		if _, ok := within(d.Real, real); !ok && real != d.Real {
			return fmt.Errorf("path %q in the %s dir %q resolves to %q, outside it (a symlink): %w", rel, d.kind, d.Path, real, pdc.ErrPermission)
		}
		cur = real
	}
	return nil
}

// openedInside checks that f, opened at rel's path after checkLinks
// passed it, is inside d. Anyone who can write in the dir can put a
// symlink out of it along the path between that check and the open, and
// the open follows it; the kernel says where the open went
// (/proc/self/fd). Without /proc the check before the open stands alone.
func (d Dir) openedInside(f *os.File, rel string) error {
	where, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		return nil
	}
	if _, ok := within(d.Real, where); !ok {
		return fmt.Errorf("path %q in the %s dir %q was opened at %q, outside it (a symlink put along the path since it was checked): %w",
			rel, d.kind, d.Path, where, pdc.ErrPermission)
	}
	return nil
}

// within reports whether p is strictly inside dir, and its relative path.
func within(dir, p string) (string, bool) {
	r, err := filepath.Rel(dir, p)
	if err != nil || r == "." || r == ".." || strings.HasPrefix(r, "../") {
		return "", false
	}
	return r, true
}

// RecordPath turns a path a user gives (to lookup, remove...) into its
// record path: a relative path as it is (cleaned and checked), an absolute
// one inside the consumer or the producer dir ("" for none), resolved
// there.
func RecordPath(path, consumerDir, producerDir string) (string, error) {
	if !filepath.IsAbs(path) {
		rel := filepath.ToSlash(filepath.Clean(path))
		return rel, CheckRel(rel)
	}
	var errs []error
	for _, d := range []struct{ dir, kind string }{{consumerDir, "consumer"}, {producerDir, "producer"}} {
		if d.dir == "" {
			continue
		}
		dir, err := OpenDir(d.dir, d.kind, false)
		if err == nil {
			var rel string
			if rel, _, err = dir.Resolve(path); err == nil {
				return rel, nil
			}
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return "", fmt.Errorf("absolute path %q, but no producer or consumer dir is set to make it relative to: %w", path, pdc.ErrInvalid)
	}
	return "", errors.Join(errs...)
}

// RecordPrefix turns a prefix a user gives to a listing or removal into
// one of record paths, as RecordPath does paths: "./" in front is dropped,
// and an absolute prefix must lie inside the consumer or the producer dir,
// which is cut off. A prefix naming a whole dir would select every
// record: that is asked for with "" (pdc stage rm --all), so it is
// refused here rather than taken for it.
func RecordPrefix(prefix, consumerDir, producerDir string) (string, error) {
	p := prefix
	for strings.HasPrefix(p, "./") {
		p = strings.TrimLeft(p[2:], "/")
	}
	if filepath.IsAbs(p) {
		found := false
		for _, dir := range []string{consumerDir, producerDir} {
			if dir == "" {
				continue
			}
			if rest, ok := strings.CutPrefix(p+"/", filepath.Clean(dir)+"/"); ok {
				p, found = strings.TrimRight(rest, "/"), true
				if strings.HasSuffix(prefix, "/") && p != "" {
					p += "/"
				}
				break
			}
		}
		if !found {
			return "", fmt.Errorf("prefix %q is absolute but inside neither the consumer dir (%q) nor the producer dir (%q): %w",
				prefix, consumerDir, producerDir, pdc.ErrInvalid)
		}
	}
	if p == "" && prefix != "" {
		return "", fmt.Errorf("prefix %q names a whole staging dir: ask for every file of the namespace instead (pdc stage rm --all): %w", prefix, pdc.ErrInvalid)
	}
	return p, nil
}

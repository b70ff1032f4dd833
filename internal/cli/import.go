package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pdcgo/pdc/client"
)

// pdc import and pdc export run the Python package's copies (python3 -m
// pdc): HDF5 files are read and written by h5py, which HDF5 users have,
// rather than by a Go HDF5 reader (a new dependency, or cgo to libhdf5);
// record 0027 weighs the two.

func init() {
	register(command{name: "import", summary: "copy an HDF5 dataset or a .npy file into an object, through the Python package",
		usage: "[flags] FILE.h5[:/DATASET] | FILE.npy",
		long: `Creates an object from an HDF5 dataset (every dataset of the file if none is
named, each named by its path; scalar attributes become tags) or from a .npy
file, copied --chunk-bytes of whole rows at a time. It runs python3 -m pdc
(pip install ./python; HDF5 files need h5py).`,
		examples: []string{"pdc import run.h5:/particles/x --container run1", "pdc import run.h5  # every dataset", "pdc import steps.npy --name step0"},
		args:     []argKind{argFile}, run: runImport})
	register(command{name: "export", summary: "copy an object into an HDF5 or .npy file, through the Python package",
		usage: "[flags] OBJECT FILE.h5|FILE.npy",
		long: `Writes an object to an HDF5 dataset (its tags as attributes; the file is created
or added to) or to a .npy file, --chunk-bytes of whole rows at a time. It runs
python3 -m pdc (pip install ./python; HDF5 files need h5py).`,
		examples: []string{"pdc export particles/x out.h5 --dataset /x", "pdc export step0 step0.npy"},
		args:     []argKind{argObject, argFile}, run: runExport})
}

// pyFlags are the flags import and export share.
type pyFlags struct {
	tmpdir, chunk, python, secret *string
}

func addPyFlags(e *env, fs *flag.FlagSet) pyFlags {
	return pyFlags{
		tmpdir: fs.String("tmpdir", e.tmpDirDefault(), "the cluster's tmpdir ($PDC_TMPDIR)"),
		chunk:  fs.String("chunk-bytes", "64MiB", "copy this much at a time, in whole rows: files larger than memory copy in bounded memory"),
		python: pythonFlag(e, fs),
		secret: secretFileFlag(e, fs),
	}
}

func (f pyFlags) args(verb string) ([]string, error) {
	n, err := parseSize(*f.chunk)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("%s: --chunk-bytes %q: want a size such as 4MiB: %w", verb, *f.chunk, errUsage)
	}
	return []string{"--tmpdir", *f.tmpdir, "--chunk-bytes", strconv.FormatInt(n, 10)}, nil
}

func runImport(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "import", "[flags] FILE.h5[:/DATASET] | FILE.npy")
	pf := addPyFlags(e, fs)
	cont := fs.String("container", "", "the container, created if missing (default: the file's name without extension)")
	name := fs.String("name", "", "the object's name (default: the dataset's path, or the .npy file's name)")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("import: want one FILE.h5[:/DATASET] or FILE.npy: %w", errUsage)
	}
	py, err := pf.args("import")
	if err != nil {
		return err
	}
	py = append([]string{"import", fs.Arg(0)}, py...)
	if *cont != "" {
		py = append(py, "--container", *cont)
	}
	if *name != "" {
		py = append(py, "--name", *name)
	}
	return pf.run(ctx, e, py)
}

func runExport(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "export", "[flags] OBJECT FILE.h5|FILE.npy")
	pf := addPyFlags(e, fs)
	dataset := fs.String("dataset", "", "the HDF5 dataset (default: /OBJECT)")
	force := fs.Bool("force", false, "replace an existing .npy file or dataset")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("export: want OBJECT and FILE.h5 or FILE.npy: %w", errUsage)
	}
	py, err := pf.args("export")
	if err != nil {
		return err
	}
	py = append([]string{"export", fs.Arg(0), fs.Arg(1)}, py...)
	if *dataset != "" {
		py = append(py, "--dataset", *dataset)
	}
	if *force {
		py = append(py, "--force")
	}
	return pf.run(ctx, e, py)
}

func (f pyFlags) run(ctx context.Context, e *env, args []string) error {
	env := []string{"PDC_TMPDIR=" + *f.tmpdir}
	if *f.secret != "" {
		env = append(env, client.EnvSecretFile+"="+*f.secret)
	}
	cmd := pythonCmd(ctx, e, *f.python, args, env...)
	cmd.Stdout, cmd.Stderr = e.stdout, e.stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("%s: %w", args[0], errPython)
	}
	if err != nil {
		return fmt.Errorf("%s: running %s (set --python or $PDC_PYTHON to a python3 with the pdc package): %w", args[0], cmd.Path, err)
	}
	return nil
}

func pythonFlag(e *env, fs *flag.FlagSet) *string {
	return fs.String("python", e.getenv("PDC_PYTHON"), "the python3 that has the pdc package ($PDC_PYTHON; default: the venv the pdc package beside this binary was installed into, else python3)")
}

// pyMain runs the package's command line, or says clearly that this
// python cannot import the package.
const pyMain = `import sys
try:
    from pdc.__main__ import main
except ImportError as e:
    sys.stderr.write("pdc %s: %s cannot import the Python package pdc (%s): install it (pip install "
                     "--no-build-isolation ./python, from a pdc checkout), or give --python or $PDC_PYTHON "
                     "a python3 that has it\n" % (sys.argv[1], sys.executable, e))
    sys.exit(1)
sys.exit(main(sys.argv[1:], prog="pdc"))
`

// errPython is the error of a python3 that failed: it said why on stderr.
var errPython = errors.New("the Python package's command failed (its message is above)")

// pythonCmd is python running the package's command line with args,
// with env added to this process's environment. An empty python is the
// venv's the package beside this binary was pip installed into (with
// that package first on its path), else python3 from PATH.
func pythonCmd(ctx context.Context, e *env, python string, args []string, env ...string) *exec.Cmd {
	env = append(os.Environ(), env...)
	if python == "" {
		python = "python3"
		if pkg, venvPy := besidePackage(); pkg != "" {
			env = append(env, "PYTHONPATH="+joinPath(filepath.Dir(pkg), e.getenv("PYTHONPATH")))
			if venvPy != "" {
				python = venvPy
			}
		}
	}
	cmd := exec.CommandContext(ctx, python, append([]string{"-c", pyMain}, args...)...)
	cmd.Env = env
	return cmd
}

// besidePackage returns the Python package dir this binary was installed
// into (PKG/_libpdc/bin/pdc, by pip install ./python), and the python of
// the venv holding it, if any; "" when the binary is not in a package.
func besidePackage() (pkg, python string) {
	exe, err := os.Executable()
	if err != nil {
		return "", ""
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	pkg = filepath.Dir(filepath.Dir(filepath.Dir(exe)))
	if filepath.Base(filepath.Dir(filepath.Dir(exe))) != "_libpdc" {
		return "", ""
	}
	if _, err := os.Stat(filepath.Join(pkg, "__init__.py")); err != nil {
		return "", ""
	}
	// PKG is VENV/lib/pythonX.Y/site-packages/pdc.
	for d, i := filepath.Dir(pkg), 0; i < 4; d, i = filepath.Dir(d), i+1 {
		if _, err := os.Stat(filepath.Join(d, "pyvenv.cfg")); err == nil {
			if p := filepath.Join(d, "bin", "python3"); exists(p) {
				return pkg, p
			}
		}
	}
	return pkg, ""
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func joinPath(first, rest string) string {
	if rest == "" {
		return first
	}
	return strings.Join([]string{first, rest}, string(os.PathListSeparator))
}

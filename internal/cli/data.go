package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/atomicfile"
	"github.com/pdcgo/pdc/region"
)

func init() {
	register(command{name: "put", summary: "write a file into an object's region", usage: "[flags] OBJECT FILE   (FILE - reads stdin)",
		examples: []string{"pdc put temperature temperature.bin", "pdc put --region 0:512,0:1024 temperature top-half.bin"},
		args:     []argKind{argObject, argFile}, run: runPut})
	register(command{name: "get", summary: "read an object's region into a file", usage: "[flags] OBJECT FILE   (FILE - writes stdout)",
		examples: []string{"pdc get temperature out.bin", "pdc get --region 0:1,0:1024 temperature - | od -t f8  # the first row of float64 values"},
		args:     []argKind{argObject, argFile}, run: runGet})
}

// Data moves in blocks of whole rows of about this many bytes, a few in
// flight, so that the file streams and the progress bar moves.
const (
	blockBytes = 16 << 20
	inFlight   = 4
)

type dataFlags struct {
	clientFlags
	region   *string
	progress *bool
	ts, uid  uint32Flag
	app      string
	open     []client.OpenOption // set by parse's caller
}

func addDataFlags(e *env, fs *flag.FlagSet) *dataFlags {
	df := &dataFlags{
		clientFlags: clientFlags{
			tmpdir:     fs.String("tmpdir", e.tmpDirDefault(), "the cluster's tmpdir ($PDC_TMPDIR)"),
			secretFile: secretFileFlag(e, fs),
			timeout:    fs.Duration("timeout", 30*time.Minute, "deadline for the whole command"),
			verbose:    fs.Bool("verbose", false, verboseUsage),
			e:          e,
		},
		region:   fs.String("region", "", "the object's region, start:end per dim (end exclusive), e.g. 0:1024,0:64; default: the whole object"),
		progress: fs.Bool("progress", false, "draw a progress bar even when stderr is not a terminal"),
	}
	fs.Var(&df.ts, "time-step", "the object's time `step` (0 to 4294967295)")
	fs.Var(&df.uid, "user-id", "the object's user `id`, for a name that several objects share: with --app, opens exactly that one")
	fs.StringVar(&df.app, "app", "", "the object's app name, for a name that several objects share: with --user-id, opens exactly that one")
	return df
}

func runPut(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "put", "[flags] OBJECT FILE   (FILE - reads stdin)")
	df := addDataFlags(e, fs)
	df.name = fs.Name()
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("put: give an object and a file: %w", errUsage)
	}
	df.open = openOptions(fs, df.ts, df.uid, df.app)
	return moveData(ctx, e, df, client.Write, fs.Arg(0), fs.Arg(1))
}

func runGet(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "get", "[flags] OBJECT FILE   (FILE - writes stdout)")
	df := addDataFlags(e, fs)
	df.name = fs.Name()
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("get: give an object and a file: %w", errUsage)
	}
	df.open = openOptions(fs, df.ts, df.uid, df.app)
	return moveData(ctx, e, df, client.Read, fs.Arg(0), fs.Arg(1))
}

// moveData streams between a file and an object's region in blocks of
// rows, inFlight blocks under way at a time.
func moveData(ctx context.Context, e *env, df *dataFlags, a client.Access, name, path string) error {
	verb := "put"
	if a == client.Read {
		verb = "get"
	}
	c, ctx, done, err := df.connect(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", verb, err)
	}
	defer done()
	o, err := c.OpenObject(ctx, name, df.open...)
	if err != nil {
		return fmt.Errorf("%s: %w", verb, err)
	}
	defer o.Close(ctx)
	info := o.Info()
	box := region.Shape(info.Props.Dims...)
	if *df.region != "" {
		if box, err = parseRegion(*df.region); err != nil {
			return fmt.Errorf("%s: --region: %v: %w", verb, err, errUsage)
		}
	} else if slices.Contains(info.Props.Dims, client.Unlimited) {
		// The whole object of an unlimited dim is no region: it was
		// refused as "region [0+18446744073709551615, ...]: more than
		// 2^64 elements", a region the user never gave.
		return fmt.Errorf("%s: object %q has dims %s, with no end to its unlimited dim: give --region, or set its dims first (pdc obj set-dims): %w",
			verb, name, formatDims(info.Props.Dims), errUsage)
	}
	if err := box.Within(info.Props.Dims); err != nil {
		return fmt.Errorf("%s: object %q: %w", verb, name, err)
	}
	elem := uint64(max(info.Props.Type.Size(), 1))
	total := box.Volume() * elem

	m := &mover{o: o, a: a, verb: verb, name: name, path: path, box: box, elem: elem, total: total}
	closeEnds, err := m.openEnds()
	if err != nil {
		return err
	}
	defer closeEnds()
	m.bar = newProgress(e.stderr, *df.progress || isTerminal(e.stderr), verb+" "+name, total)
	if err := m.move(ctx, blocksOf(box, elem)); err != nil {
		return err
	}
	if a == client.Write {
		var extra [1]byte
		if n, _ := m.f.Read(extra[:]); n > 0 {
			return fmt.Errorf("put: %s holds more than object %q region %v takes (%s): %w", path, name, box, count(total, "byte", "bytes"), pdc.ErrInvalid)
		}
		if err := o.Flush(ctx); err != nil {
			return fmt.Errorf("put: %w", err)
		}
	}
	if m.commit != nil {
		if err := m.commit(); err != nil {
			return fmt.Errorf("get: %w", err)
		}
	}
	m.bar.finish()
	return nil
}

// mover moves the bytes of a put or a get between a file and a region
// of an object.
type mover struct {
	o     *client.Object
	a     client.Access
	verb  string // put or get
	name  string // the object's
	path  string // the file's; - is stdin or stdout
	box   region.Box
	elem  uint64 // bytes per element
	total uint64 // bytes of box
	bar   *progress

	f      *os.File     // put: where the bytes come from
	out    io.Writer    // get: where the bytes go
	commit func() error // get to a file: makes it appear
}

// openEnds opens the file end of the move. A put from a regular file
// must fit the region exactly. It returns what closes the file.
func (m *mover) openEnds() (func(), error) {
	switch {
	case m.path == "-" && m.a == client.Write:
		m.f = os.Stdin
	case m.path == "-":
		m.out = os.Stdout
	case m.a == client.Write:
		f, err := os.Open(m.path)
		if err != nil {
			return nil, fmt.Errorf("put: %w", err)
		}
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && uint64(st.Size()) != m.total {
			f.Close()
			return nil, fmt.Errorf("put: %s holds %s; object %q region %v takes %d (%s of %s): %w",
				m.path, count(st.Size(), "byte", "bytes"), m.name, m.box, m.total, count(m.box.Volume(), "element", "elements"), m.o.Info().Props.Type, pdc.ErrInvalid)
		}
		m.f = f
		return func() { f.Close() }, nil
	default:
		w, done, err := createOutput(m.path)
		if err != nil {
			return nil, fmt.Errorf("get: %w", err)
		}
		m.out, m.commit = w, w.Commit
		return done, nil
	}
	return func() {}, nil
}

// blocksOf splits box into blocks of whole rows of about blockBytes.
func blocksOf(box region.Box, elem uint64) []region.Box {
	rowBytes := elem
	for _, s := range box.Size[1:] {
		rowBytes *= s
	}
	rows := max(1, blockBytes/rowBytes)
	var blocks []region.Box
	for r := uint64(0); r < box.Size[0]; r += rows {
		b := box.Clone()
		b.Off[0] += r
		b.Size[0] = min(rows, box.Size[0]-r)
		blocks = append(blocks, b)
	}
	return blocks
}

// flight is a block's transfer under way, with its buffer.
type flight struct {
	t   *client.Transfer
	buf []byte
}

// move transfers blocks in order, inFlight at a time, reusing the
// buffers of those done.
func (m *mover) move(ctx context.Context, blocks []region.Box) error {
	var queue []flight
	free := make([][]byte, 0, inFlight)
	next := 0
	for next < len(blocks) || len(queue) > 0 {
		for next < len(blocks) && len(queue) < inFlight {
			var buf []byte
			if n := blocks[next].Volume() * m.elem; len(free) > 0 && uint64(cap(free[len(free)-1])) >= n {
				buf, free = free[len(free)-1][:n], free[:len(free)-1]
			} else {
				buf = make([]byte, n)
			}
			fl, err := m.start(ctx, blocks[next], buf)
			if err != nil {
				return err
			}
			queue = append(queue, fl)
			next++
		}
		fl := queue[0]
		queue = queue[1:]
		if err := fl.t.Wait(ctx); err != nil {
			return fmt.Errorf("%s: %w", m.verb, err)
		}
		if m.a == client.Read {
			if _, err := m.out.Write(fl.buf); err != nil {
				return fmt.Errorf("get: %w", err)
			}
		}
		free = append(free, fl.buf)
		m.bar.add(uint64(len(fl.buf)))
	}
	return nil
}

// start starts the transfer of block b through buf: a put reads the
// block's bytes from the file first.
func (m *mover) start(ctx context.Context, b region.Box, buf []byte) (flight, error) {
	var t *client.Transfer
	var err error
	if m.a == client.Write {
		if _, err := io.ReadFull(m.f, buf); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				return flight{}, fmt.Errorf("put: %s ended before object %q region %v was filled (%s): %w", m.path, m.name, m.box, count(m.total, "byte", "bytes"), pdc.ErrInvalid)
			}
			return flight{}, fmt.Errorf("put: %w", err)
		}
		t, err = m.o.StartWrite(ctx, b, buf)
	} else {
		t, err = m.o.StartRead(ctx, b, buf)
	}
	if err != nil {
		return flight{}, fmt.Errorf("%s: %w", m.verb, err)
	}
	return flight{t, buf}, nil
}

// outputFile is where a command writes a file it produces.
type outputFile interface {
	io.Writer
	Commit() error
}

// createOutput opens path for a command's output. A regular file (or a
// new one) is replaced only once all of it is written (Commit): a command
// that fails part way leaves whatever was there before untouched. Anything
// else (a device, a pipe) is written in place. done releases what Commit
// did not.
func createOutput(path string) (outputFile, func(), error) {
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() && !st.IsDir() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return nil, nil, err
		}
		return inPlace{f}, func() { f.Close() }, nil
	}
	f, err := atomicfile.Create(path, 0o666)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Abort, nil
}

// inPlace is an output that cannot be replaced, written as it goes.
type inPlace struct{ *os.File }

func (f inPlace) Commit() error { return nil }

// parseRegion reads "start:end,start:end,...", one pair per dim, end
// exclusive.
func parseRegion(s string) (region.Box, error) {
	var b region.Box
	for i, p := range strings.Split(s, ",") {
		lo, hi, ok := strings.Cut(strings.TrimSpace(p), ":")
		if !ok {
			return b, fmt.Errorf("dim %d: %q is not start:end", i, p)
		}
		start, err1 := strconv.ParseUint(lo, 10, 64)
		end, err2 := strconv.ParseUint(hi, 10, 64)
		if err1 != nil || err2 != nil {
			return b, fmt.Errorf("dim %d: %q is not start:end", i, p)
		}
		if end <= start {
			return b, fmt.Errorf("dim %d: %q is empty (end must be past start)", i, p)
		}
		b.Off = append(b.Off, start)
		b.Size = append(b.Size, end-start)
	}
	return b, nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progress draws a one-line bar, redrawn at most every 100 ms.
type progress struct {
	w     io.Writer
	on    bool
	what  string
	total uint64
	done  uint64
	start time.Time
	last  time.Time
	drawn uint64 // done when last drawn
}

func newProgress(w io.Writer, on bool, what string, total uint64) *progress {
	return &progress{w: w, on: on, what: what, total: total, start: time.Now()}
}

func (p *progress) add(n uint64) {
	p.done += n
	if p.on && time.Since(p.last) >= 100*time.Millisecond {
		p.draw()
	}
}

func (p *progress) draw() {
	p.last, p.drawn = time.Now(), p.done
	const width = 30
	frac := 1.0
	if p.total > 0 {
		frac = float64(p.done) / float64(p.total)
	}
	fill := int(frac * width)
	rate := float64(p.done) / max(time.Since(p.start).Seconds(), 1e-9) / 1e6
	fmt.Fprintf(p.w, "\r%s [%s%s] %3.0f%% %s/%s %.0f MB/s", p.what, strings.Repeat("=", fill), strings.Repeat(" ", width-fill),
		100*frac, humanBytes(p.done), humanBytes(p.total), rate)
}

func (p *progress) finish() {
	if p.on {
		if p.drawn != p.done || p.last.IsZero() {
			p.draw()
		}
		fmt.Fprintln(p.w)
	}
}

func humanBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

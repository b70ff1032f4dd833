package capi

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
)

// C's result codes (perr_t).
const (
	Succeed = 0  // SUCCEED
	Fail    = -1 // FAIL
)

// EnvTimeout bounds every call that talks to servers and takes no timeout
// of its own: a number of seconds ("30", "0.5") or a Go duration ("90s",
// "2m"). PDCinit reads it; its connection keeps the value.
const EnvTimeout = "PDC_TIMEOUT"

// EnvHost names this node as the servers know it (default the kernel's
// host name); EnvDTL picks the transport of staged files (stream, pull,
// push, shm or auto).
const (
	EnvHost = "PDC_HOST"
	EnvDTL  = "PDC_DTL"
)

// DefaultTimeout is the deadline of calls when $PDC_TIMEOUT is unset.
const DefaultTimeout = 30 * time.Second

// Config configures a Lib.
type Config struct {
	// Stderr receives one line per failing call. Default os.Stderr.
	Stderr io.Writer
	// Getenv reads the environment: $PDC_TMPDIR, $PDC_SECRET_FILE,
	// $PDC_TIMEOUT, $PDC_HOST, $PDC_DTL and the staging variables. Default os.Getenv.
	Getenv func(string) string
	// ClientOptions are added to every PDCinit's client.Connect, after
	// the defaults (which come from the environment). Tests use them.
	ClientOptions []client.Option
}

// Lib is libpdc's state. The zero value is not usable; call New.
type Lib struct {
	cfg Config

	outMu sync.Mutex // keeps report lines whole, guards last and silent
	// last is the most recent report line: bindings (python/pdc) turn
	// it into an exception carrying the message, where C reads stderr.
	last string
	// silent: the lines are kept for LastReport but not printed
	// (SetReports), for bindings that raise them instead.
	silent bool

	mu struct {
		sync.Mutex
		next    uint64             // the last id handed out
		handles map[uint64]*handle // open handles by id
		// base: ids up to it belong to the processes this one was
		// forked from (ForkedGeneration).
		base uint64
	}
}

// ForkedGeneration tells l that it is the copy of the library a process
// forked gen times since its first loaded (libpdc.so's loader, capi/shim,
// loads a fresh copy in a forked child). Its ids then start above gen<<32,
// so that an id the child inherited from a parent is refused as one,
// never taken for one of the child's own. Call it before the first
// handle is made.
func (l *Lib) ForkedGeneration(gen uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.next == 0 {
		l.mu.base = uint64(gen) << 32
		l.mu.next = l.mu.base
	}
}

// New returns a Lib with no open handles.
func New(cfg Config) *Lib {
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	l := &Lib{cfg: cfg}
	l.mu.handles = map[uint64]*handle{}
	return l
}

// report prints the one line that tells a C caller why call failed.
func (l *Lib) report(call string, err error) {
	msg := strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
	l.outMu.Lock()
	defer l.outMu.Unlock()
	l.last = fmt.Sprintf("libpdc: %s: %s", call, msg)
	if !l.silent {
		fmt.Fprintln(l.cfg.Stderr, l.last)
	}
}

// SetReports is pdc_report_errors: whether failing calls print their
// line on stderr (the default) or only keep it for LastReport.
func (l *Lib) SetReports(print bool) {
	l.outMu.Lock()
	defer l.outMu.Unlock()
	l.silent = !print
}

// LastReport returns the most recent report line (without its newline),
// or "" if no call has failed. It is the process's last: with calls
// failing at once on several threads, it is one of theirs.
func (l *Lib) LastReport() string {
	l.outMu.Lock()
	defer l.outMu.Unlock()
	return l.last
}

// run runs fn as the C function call (its name and arguments, for the
// report) and returns its perr_t. It reports fn's error, and a panic as an
// internal error: a bug in libpdc must not abort the C program.
func (l *Lib) run(call string, fn func() error) (rc int) {
	return l.runLazy(func() string { return call }, fn)
}

// runLazy is run for the calls made once per element of a loop (a row
// written, a tag put): call names it only when there is something to
// report, so a call that succeeds formats nothing.
func (l *Lib) runLazy(call func() string, fn func() error) (rc int) {
	defer func() {
		if r := recover(); r != nil {
			l.report(call(), fmt.Errorf("a bug in libpdc, please report this line: %v: %w", r, pdc.ErrInternal))
			rc = Fail
		}
	}()
	if err := fn(); err != nil {
		l.report(call(), err)
		return Fail
	}
	return Succeed
}

// runID is run for a function that returns a handle: 0 on failure.
func (l *Lib) runID(call string, fn func() (uint64, error)) uint64 {
	return l.runIDLazy(func() string { return call }, fn)
}

// runIDLazy is runID with the call named only to report it (runLazy).
func (l *Lib) runIDLazy(call func() string, fn func() (uint64, error)) uint64 {
	var id uint64
	if l.runLazy(call, func() (err error) { id, err = fn(); return err }) != Succeed {
		return 0
	}
	return id
}

// parseTimeout reads $PDC_TIMEOUT's value.
func parseTimeout(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return DefaultTimeout, nil
	}
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		return seconds(secs, EnvTimeout+"="+s)
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive number of seconds or a duration such as 90s or 2m: %w", EnvTimeout, s, pdc.ErrInvalid)
	}
	return d, nil
}

// seconds converts a C timeout in seconds. It must be positive; +Inf and
// values past what a Duration holds mean no limit (returned as 0).
func seconds(secs float64, what string) (time.Duration, error) {
	if math.IsNaN(secs) || secs <= 0 {
		return 0, fmt.Errorf("%s: want a positive number of seconds: %w", what, pdc.ErrInvalid)
	}
	if secs >= float64(math.MaxInt64)/float64(time.Second) {
		return 0, nil
	}
	// A timeout too small for a Duration is the smallest one, not none.
	return max(time.Duration(secs*float64(time.Second)), 1), nil
}

// withTimeout is a call's context, bounded by d (0: no limit). Its calls
// wait for replies in poll(2) (client.WithBlockingWait): libpdc is called
// on C's threads, where parking a goroutine costs two thread switches a
// reply.
func withTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	if d == 0 {
		return context.WithCancel(blockingBackground)
	}
	return withDeadlineLazy(blockingBackground, time.Now().Add(d))
}

// blockingBackground is the parent of every call's context: made once, not
// once a call.
var blockingBackground = client.WithBlockingWait(context.Background())

// conn is the state of a connection (a pdc id from PDCinit).
type conn struct {
	name    string
	dtl     string // $PDC_DTL at PDCinit
	c       *client.Client
	timeout time.Duration // 0: no limit
	closed  bool          // by PDCclose; guarded by Lib.mu
}

// ctx is the context of one call on the connection.
func (p *conn) ctx() (context.Context, context.CancelFunc) { return withTimeout(p.timeout) }

// Init is PDCinit: it connects to the cluster in $PDC_TMPDIR and checks that
// rank 0 answers.
func (l *Lib) Init(name string) uint64 {
	return l.runID(fmt.Sprintf("PDCinit(%q)", name), func() (uint64, error) { return l.init(name) })
}

func (l *Lib) init(name string) (uint64, error) {
	timeout, err := parseTimeout(l.cfg.Getenv(EnvTimeout))
	if err != nil {
		return 0, err
	}
	ctx, cancel := withTimeout(timeout)
	defer cancel()
	opts := append(l.clientOptions(), client.WithName(clientName(name)))
	c, err := client.Connect(ctx, opts...)
	if errors.Is(err, pdc.ErrNotFound) {
		// Servers started just before the program may still be writing
		// the list: wait for it. Only a failure is reported (one line,
		// saying it waited): a call that succeeds prints nothing.
		c, err = client.Connect(ctx, append(opts, client.WithWait())...)
		if err != nil {
			return 0, fmt.Errorf("waited up to %v for servers to start: %w", describe(timeout), err)
		}
	}
	if err != nil {
		return 0, err
	}
	if _, err := c.Ping(ctx, 0); err != nil {
		c.Close()
		return 0, fmt.Errorf("the cluster in %s does not answer (servers stopped? start them with pdc up): %w", c.TmpDir(), err)
	}
	return l.add(&handle{kind: kindConn, conn: &conn{name: name, c: c, timeout: timeout, dtl: l.dtlMode()}})
}

// clientOptions are the settings of a connection, from the environment as
// Getenv sees it (in libpdc, the C program's: a setenv before PDCinit
// counts, which Go's own copy of the environment would miss).
func (l *Lib) clientOptions() []client.Option {
	env := l.cfg.Getenv
	tmpdir := env("PDC_TMPDIR")
	if tmpdir == "" {
		tmpdir = "pdc_tmp"
	}
	shared := strings.ToLower(l.envOr(client.EnvShared, EnvDyadShared))
	opts := []client.Option{
		client.WithTmpDir(tmpdir),
		client.WithStageDirs(l.envOr(client.EnvProducerDir, EnvDyadProducer), l.envOr(client.EnvConsumerDir, EnvDyadConsumer)),
		client.WithSharedStorage(shared == "1" || shared == "true" || shared == "yes"),
		client.WithNamespace(l.envOr(client.EnvNamespace, EnvDyadKVSNamespace)),
	}
	if host := env(EnvHost); host != "" {
		opts = append(opts, client.WithHost(host))
	}
	if f := env(client.EnvSecretFile); f != "" {
		opts = append(opts, client.WithSecretFile(f))
	}
	return append(opts, l.cfg.ClientOptions...)
}

func describe(d time.Duration) string {
	if d == 0 {
		return "no limit"
	}
	return d.String()
}

// clientName names this connection in the servers' logs. Servers track
// open objects per client name, so it must be unique per connection.
func clientName(name string) string {
	host, _ := os.Hostname()
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("libpdc:%s:%d@%s/%x", name, os.Getpid(), host, r)
}

// Close is PDCclose: it finishes the transfers still in flight through the
// connection (waiting for those started and not waited), closes its
// objects, which flushes them, then the connection and every handle opened
// through it. A transfer or object that fails is reported, and the rest are
// still closed.
func (l *Lib) Close(id uint64) int {
	return l.run(fmt.Sprintf("PDCclose(%d)", id), func() error { return l.close(id) })
}

func (l *Lib) close(id uint64) error {
	l.mu.Lock()
	h, err := l.lookupLocked(id, kindConn)
	if err != nil {
		l.mu.Unlock()
		return err
	}
	h.conn.closed = true
	var xfers, objs []*handle
	for hid, o := range l.mu.handles {
		if o.conn != h.conn {
			continue
		}
		delete(l.mu.handles, hid)
		switch o.kind {
		case kindTransfer:
			xfers = append(xfers, o)
		case kindObj:
			objs = append(objs, o)
		}
	}
	l.mu.Unlock()

	// No new handle can join the connection now (add refuses a closed
	// one), and the handles are out of the table, so nothing else starts
	// a transfer on them; calls already inside finish first, under the
	// objects' locks, until the deadline: one still busy then is left to
	// the connection's close.
	ctx, cancel := h.conn.ctx()
	defer cancel()
	var errs []error
	for _, t := range xfers {
		err := t.xferObj.lock(ctx, t.xferObj.objWhat)
		if err == nil {
			err = t.xfer.Close(ctx)
			t.xferObj.unlock()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("transfer %d on object %q: %w", t.id, t.xferObj.objName, err))
		}
	}
	for _, o := range objs {
		err := o.lock(ctx, o.objWhat)
		if err == nil {
			if !o.objClosed { // else PDCobj_close closed it
				o.objClosed = true
				err = o.obj.Close(ctx)
			}
			o.unlock()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("object %q: %w", o.objName, err))
		}
	}
	errs = append(errs, h.conn.c.Close())
	return errors.Join(errs...)
}

// Report reports a failure the C layer found before calling into the Lib
// (a NULL out-pointer, say) and returns Fail.
func (l *Lib) Report(call string, err error) int { return l.run(call, func() error { return err }) }

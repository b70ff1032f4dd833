package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/batch"
	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/staging"
	"github.com/pdcgo/pdc/internal/wire"
)

// Environment variables of staging (DYAD's DYAD_PATH_PRODUCER,
// DYAD_PATH_CONSUMER and DYAD_SHARED_STORAGE).
const (
	EnvProducerDir = "PDC_STAGE_PRODUCER_DIR"
	EnvConsumerDir = "PDC_STAGE_CONSUMER_DIR"
	EnvShared      = "PDC_STAGE_SHARED"
	// EnvLink set to 1 or true asks for hard links on the owner's node
	// (WithLinkLocal).
	EnvLink = "PDC_STAGE_LINK"
)

// WithStageDirs sets the producer and consumer dirs (default
// $PDC_STAGE_PRODUCER_DIR and $PDC_STAGE_CONSUMER_DIR). Either may be
// empty for a client that only produces or only consumes.
func WithStageDirs(producer, consumer string) Option {
	return func(o *options) { o.producerDir, o.consumerDir, o.stageDirsSet = producer, consumer, true }
}

// WithSharedStorage says the producer dirs are on storage every host sees
// (default: $PDC_STAGE_SHARED is 1 or true): a consumer then links or
// copies the owner's file from its path instead of fetching it.
func WithSharedStorage(shared bool) Option {
	return func(o *options) { o.shared, o.sharedSet = shared, true }
}

// WithLinkLocal asks a consumer on the owner's node (or on shared
// storage) for a hard link to the owner's file instead of a reflink or a
// copy (default: $PDC_STAGE_LINK is 1 or true). A link is the producer's
// own inode: only a consumer that never writes to its file may ask, or it
// changes the producer's file and fails every later consumer's checksum.
func WithLinkLocal(link bool) Option {
	return func(o *options) { o.link, o.linkSet = link, true }
}

// WithHost sets the host name the client compares with the servers' to
// find those on its node (default $PDC_HOST, else the kernel's).
func WithHost(host string) Option { return func(o *options) { o.host = host } }

// StagedFile is the record of a produced file.
type StagedFile struct {
	// Path is relative to the managed dirs, slash-separated.
	Path    string
	Version uint64
	// Owner is the server that serves the file; Host is its host.
	Owner    Server
	Host     string
	Size     int64
	ModTime  time.Time
	CRC      uint32 // CRC-32C of the contents
	Produced time.Time
	// Namespace is the run it was produced in ("" the default one).
	Namespace string
}

// How a consumed file got to the consumer dir.
type How string

// The ways a consume places a file.
const (
	// Cached: the consumer dir already held this version; nothing moved.
	Cached How = "cached"
	// Direct: the consumer dir is the owner's producer dir; nothing moved.
	Direct How = staging.Direct
	// Linked: the owner's file is on this host (or shared storage); it
	// was hard-linked into the consumer dir, as WithLinkLocal asked.
	Linked How = staging.Linked
	// Reflinked: as Linked, but a copy-on-write clone of the owner's file
	// (a file of its own, whose blocks are shared until written).
	Reflinked How = staging.Reflinked
	// Copied: as Reflinked, where the file system cannot clone: copied
	// on this host.
	Copied How = staging.Copied
	// Fetched: moved from the owner's server through the DTL.
	Fetched How = "fetched"
	// Inline: a small file that came whole in its record, from the
	// metadata server; the owner was not asked.
	Inline How = "inline"
)

// Consumed says where a consumed file is and how it got there.
type Consumed struct {
	StagedFile
	// Local is the absolute path of the file in the consumer dir.
	Local string
	How   How
	// Mode is the DTL mode a fetch used.
	Mode string
	// Moved is the number of bytes fetched (0 unless How is Fetched or
	// Inline).
	Moved int64
}

// ConsumeOption configures one Consume.
type ConsumeOption func(*consumeOpts)

type consumeOpts struct {
	mode     dtl.Mode
	modeSet  bool
	modeErr  error // an unknown mode's name: the consume fails at once
	progress func(done, total int64)
	waiting  func(path string)
	after    uint64 // WithNewerThan
}

// WithTransport picks the DTL mode of the fetch: "stream", "pull", "push",
// "shm" or "auto" (default: $PDC_DTL, else auto: shm on one host, pull
// across hosts). An unknown name fails the consume before it does
// anything, with an error naming the valid modes.
func WithTransport(mode string) ConsumeOption {
	return func(o *consumeOpts) {
		m, err := dtl.ParseMode(mode)
		o.mode, o.modeSet, o.modeErr = m, true, err
	}
}

// WithProgress calls fn as a fetch's bytes arrive (not for small files,
// which come in one answer).
func WithProgress(fn func(done, total int64)) ConsumeOption {
	return func(o *consumeOpts) { o.progress = fn }
}

// WithWaiting calls fn once if the file has not been produced yet and the
// consume starts waiting for it.
func WithWaiting(fn func(path string)) ConsumeOption {
	return func(o *consumeOpts) { o.waiting = fn }
}

// stageConfig is the client's staging configuration.
type stageConfig struct {
	producerDir, consumerDir string
	shared                   bool
	link                     bool // hard links on the owner's node (WithLinkLocal)
	host                     string
	namespace                string // WithNamespace
}

// consumerDir is the consumer dir, resolved (and created) on first use.
func (c *Client) consumerDir() (staging.Dir, error) {
	c.recv.mu.Lock()
	defer c.recv.mu.Unlock()
	if c.recv.consumer.Real != "" {
		return c.recv.consumer, nil
	}
	d, err := staging.OpenDir(c.stage.consumerDir, "consumer", true)
	if err == nil {
		c.recv.consumer = d
	}
	return d, err
}

// stageRecv is the client's DTL receiver, made on first use, and its
// consumer dir once resolved.
type stageRecv struct {
	mu       sync.Mutex
	recv     *dtl.Receiver // guarded by mu
	closed   bool          // guarded by mu
	consumer staging.Dir   // guarded by mu
}

func (r *stageRecv) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.recv != nil {
		r.recv.Close()
	}
}

func (o *options) stage() stageConfig {
	st := stageConfig{producerDir: o.producerDir, consumerDir: o.consumerDir, shared: o.shared, link: o.link, host: o.host}
	if !o.stageDirsSet {
		st.producerDir, st.consumerDir = os.Getenv(EnvProducerDir), os.Getenv(EnvConsumerDir)
	}
	if !o.sharedSet {
		v := strings.ToLower(os.Getenv(EnvShared))
		st.shared = v == "1" || v == "true" || v == "yes"
	}
	if !o.linkSet {
		v := strings.ToLower(os.Getenv(EnvLink))
		st.link = v == "1" || v == "true" || v == "yes"
	}
	st.namespace = o.namespace
	if !o.namespaceSet {
		st.namespace = os.Getenv(EnvNamespace)
	}
	return st
}

func (c *Client) receiver() (*dtl.Receiver, error) {
	r := &c.recv
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("the client is closed: %w", pdc.ErrClosed)
	}
	if r.recv == nil {
		recv, err := dtl.NewReceiver(dtl.ReceiverConfig{Secret: c.dial.Secret, ClientName: c.dial.ClientName})
		if err != nil {
			return nil, err
		}
		r.recv = recv
	}
	return r.recv, nil
}

func recordOf(f *wire.StageRecord) StagedFile {
	return StagedFile{Path: f.Path, Version: f.Version, Host: f.Host, Size: int64(f.Size),
		ModTime: time.Unix(0, f.MtimeNS), CRC: f.CRC, Produced: time.Unix(0, f.Produced), Namespace: f.Namespace}
}

func (c *Client) staged(r *wire.StageRecord) StagedFile {
	sf := recordOf(r)
	if s, _, err := c.server(int(r.Owner)); err == nil {
		sf.Owner = s
	} else {
		sf.Owner = Server{Rank: int(r.Owner)}
	}
	return sf
}

// stageMeta is the rank of the metadata server holding rel's record.
func (c *Client) stageMeta(rel string) (int, error) {
	return c.ownerOfKey(placement.Key(rel, 0))
}

// stageOwner finds the server that serves files from dir on this host.
func (c *Client) stageOwner(dir staging.Dir) (Server, error) {
	var here []string
	for _, s := range c.Servers() {
		if s.Host != c.stage.host {
			continue
		}
		if s.StageDir != "" {
			if s.StageDir == dir.Path || s.StageDir == dir.Real {
				return s, nil
			}
			if real, err := filepath.EvalSymlinks(s.StageDir); err == nil && real == dir.Real {
				return s, nil
			}
		}
		here = append(here, fmt.Sprintf("%s serves %q", s.Label(), s.StageDir))
	}
	if len(here) == 0 {
		return Server{}, fmt.Errorf("no pdc server runs on host %s to serve files produced here; start one there with --stage-producer-dir %q: %w",
			c.stage.host, dir.Path, pdc.ErrUnavailable)
	}
	return Server{}, fmt.Errorf("no server on host %s serves the producer dir %q (%s); start one with --stage-producer-dir %q or use its dir: %w",
		c.stage.host, dir.Path, strings.Join(here, ", "), dir.Path, pdc.ErrInvalid)
}

// Produce records files the caller has written and closed in its producer
// dir (dyad_produce), so that consumers anywhere can get them: for each,
// its owner (the server on this host serving the producer dir), size,
// modification time and CRC-32C go to the metadata server that owns its
// path, with a version one past the last produce of that path. Paths are
// relative to the producer dir or absolute inside it. Empty files are
// valid. Each file is read under an exclusive lock while its checksum is
// taken and its record stored, so the owner's server does not serve it
// half-checked.
func (c *Client) Produce(ctx context.Context, paths ...string) ([]StagedFile, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	dir, err := staging.OpenDir(c.stage.producerDir, "producer", false)
	if err != nil {
		return nil, fmt.Errorf("produce: %w", err)
	}
	owner, err := c.stageOwner(dir)
	if err != nil {
		return nil, fmt.Errorf("produce: %w", err)
	}
	out := make([]StagedFile, 0, len(paths))
	// A bounded number of files is held open and locked at a time.
	const chunk = 256
	for start := 0; start < len(paths); start += chunk {
		part, err := c.produce(ctx, dir, owner, paths[start:min(len(paths), start+chunk)])
		out = append(out, part...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func (c *Client) produce(ctx context.Context, dir staging.Dir, owner Server, paths []string) ([]StagedFile, error) {
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close() // releases its lock
		}
	}()
	recs := make([]wire.StageRecord, len(paths))
	// Each path names a file opened here, or one named before it: by the
	// same path, or another path to the same file (a hard link, a
	// symlink), whose lock, taken again, would wait for this very
	// produce's. The server gives each its own version.
	type open struct {
		i   int
		rel string
		f   *os.File
		id  staging.FileID
	}
	var opened []open
	sameAs := make([]int, len(paths))
	rels := make([]string, len(paths))
	first := make(map[string]int, len(paths))        // the first index of each path
	same := make(map[staging.FileID]int, len(paths)) // and of each file
	for i, p := range paths {
		sameAs[i] = -1
		rel, abs, err := dir.Resolve(p)
		if err != nil {
			return nil, fmt.Errorf("produce %q: %w", p, err)
		}
		rels[i] = rel
		if j, dup := first[rel]; dup {
			sameAs[i] = j
			continue
		}
		first[rel] = i
		f, id, err := staging.OpenUnlocked(dir, abs)
		if err != nil {
			return nil, fmt.Errorf("produce %q: %w", rel, err)
		}
		if j, dup := same[id]; dup {
			f.Close()
			sameAs[i] = j
			continue
		}
		same[id] = i
		files = append(files, f)
		opened = append(opened, open{i: i, rel: rel, f: f, id: id})
	}
	// Locked in one order, the files' IDs, whatever the order named:
	// each lock is held until the records are stored, and two produces
	// of the same files taking them in the orders named would each hold
	// one the other waits for.
	slices.SortFunc(opened, func(a, b open) int {
		return cmp.Or(cmp.Compare(a.id.Dev, b.id.Dev), cmp.Compare(a.id.Ino, b.id.Ino))
	})
	for _, o := range opened {
		rec, err := staging.Describe(ctx, o.f, o.rel)
		if err != nil {
			return nil, fmt.Errorf("produce %q: %w", o.rel, err)
		}
		rec.Owner, rec.Host, rec.Namespace = uint32(owner.Rank), owner.Host, c.stage.namespace
		recs[o.i] = rec
	}
	for i, j := range sameAs {
		if j >= 0 { // j < i: recs[j] is complete
			recs[i] = recs[j]
			recs[i].Path = rels[i]
		}
	}
	if err := c.recordProduced(ctx, recs); err != nil {
		return nil, err
	}
	out := make([]StagedFile, len(recs))
	for i := range recs {
		out[i] = c.staged(&recs[i])
	}
	return out, nil
}

// recordProduced records the produced files with the metadata servers
// that own their paths, a batch per server, and puts the stored records,
// versions assigned, in recs.
func (c *Client) recordProduced(ctx context.Context, recs []wire.StageRecord) error {
	groups := map[int][]int{}
	for i := range recs {
		rank, err := c.stageMeta(recs[i].Path)
		if err != nil {
			return fmt.Errorf("produce %q: %w", recs[i].Path, err)
		}
		groups[rank] = append(groups[rank], i)
	}
	size := func(i int) int { return len(recs[i].Path) + len(recs[i].Host) + len(recs[i].Data) + 64 }
	return batch.InChunks(groups, size, func(rank int, part []int) error {
		in := wire.StageBatch{Records: make([]wire.StageRecord, len(part)), Version: wire.StageVersion}
		for j, i := range part {
			in.Records[j] = recs[i]
		}
		got, err := c.calls().StageProduce(ctx, rank, &in)
		if err != nil {
			return fmt.Errorf("produce %q: %w", in.Records[0].Path, err)
		}
		if len(got.Records) != len(part) {
			return fmt.Errorf("produce: %s answered %d records for %d files: %w", c.label(rank), len(got.Records), len(part), pdc.ErrProtocol)
		}
		for j, i := range part {
			recs[i] = got.Records[j]
		}
		return nil
	})
}

// Lookup returns the record of a produced file, or an error wrapping
// pdc.ErrNotFound if it has not been produced.
func (c *Client) Lookup(ctx context.Context, path string) (StagedFile, error) {
	rel, err := staging.RecordPath(path, c.stage.consumerDir, c.stage.producerDir)
	if err != nil {
		return StagedFile{}, fmt.Errorf("lookup: %w", err)
	}
	r, err := c.lookupRecord(ctx, rel)
	if err != nil {
		return StagedFile{}, fmt.Errorf("lookup %q: %w", rel, err)
	}
	return c.staged(r), nil
}

// WaitProduced is Lookup that, if path has not been produced yet, waits
// (on the metadata server, not by polling) until it is or ctx ends
// (dyad_get_metadata with should_wait).
func (c *Client) WaitProduced(ctx context.Context, path string) (StagedFile, error) {
	if c.stage.consumerDir != "" {
		// Created as Consume would: the caller waits in order to consume
		// there, and an absolute path in it must resolve before then.
		if _, err := c.consumerDir(); err != nil {
			return StagedFile{}, fmt.Errorf("wait for %q: %w", path, err)
		}
	}
	rel, err := staging.RecordPath(path, c.stage.consumerDir, c.stage.producerDir)
	if err != nil {
		return StagedFile{}, fmt.Errorf("wait for %q: %w", path, err)
	}
	r, err := c.lookupRecord(ctx, rel)
	if errors.Is(err, pdc.ErrNotFound) {
		r, err = c.waitRecord(ctx, rel, 0)
	}
	if err != nil {
		return StagedFile{}, fmt.Errorf("wait for %q: %w", rel, err)
	}
	return c.staged(r), nil
}

func (c *Client) lookupRecord(ctx context.Context, rel string) (*wire.StageRecord, error) {
	rank, err := c.stageMeta(rel)
	if err != nil {
		return nil, err
	}
	return c.calls().StageLookup(ctx, rank, &wire.StageKey{Path: rel, Namespace: c.stage.namespace, Version: wire.StageVersion})
}

// waitRecord waits on the metadata server for a version of rel newer than
// after.
func (c *Client) waitRecord(ctx context.Context, rel string, after uint64) (*wire.StageRecord, error) {
	rank, err := c.stageMeta(rel)
	if err != nil {
		return nil, err
	}
	return c.calls().StageWait(ctx, rank, &wire.StageKey{Path: rel, After: after, Namespace: c.stage.namespace, Version: wire.StageVersion})
}

// Consume makes a produced file available in the consumer dir
// (dyad_consume) and returns once the copy there is complete and verified.
// If the file has not been produced yet, it waits (on the metadata server,
// not by polling) until it is or ctx ends. A copy already holding the
// current version is left alone. A file owned on this host, or on shared
// storage, is reflinked (or copied; hard-linked if WithLinkLocal) from
// the owner's producer dir;
// otherwise it is fetched from the owner's server through the DTL into a
// temporary file, checked against the CRC-32C recorded at produce,
// fsynced and renamed into place; a small file comes whole in its record
// (Inline), and the owner is not asked. Consumers of one file on one host fetch
// it once: the others wait for the first and find its copy current.
func (c *Client) Consume(ctx context.Context, path string, opts ...ConsumeOption) (Consumed, error) {
	var o consumeOpts
	for _, opt := range opts {
		opt(&o)
	}
	if o.modeErr != nil {
		return Consumed{}, fmt.Errorf("consume %q: %w", path, o.modeErr)
	}
	dir, err := c.consumerDir()
	if err != nil {
		return Consumed{}, fmt.Errorf("consume %q: %w", path, err)
	}
	rel, dst, err := dir.Resolve(path)
	if err != nil {
		return Consumed{}, fmt.Errorf("consume %q: %w", path, err)
	}
	got, err := c.consume(ctx, dir, rel, dst, &o)
	if err != nil {
		return got, fmt.Errorf("consume %q: %w", rel, err)
	}
	return got, nil
}

func (c *Client) consume(ctx context.Context, dir staging.Dir, rel, dst string, o *consumeOpts) (Consumed, error) {
	rec, err := c.lookupRecord(ctx, rel)
	if errors.Is(err, pdc.ErrNotFound) || (err == nil && rec.Version <= o.after) {
		if o.waiting != nil {
			o.waiting(rel)
		}
		rec, err = c.waitRecord(ctx, rel, o.after)
		// The server ends the wait at the caller's deadline too, and its
		// answer may come a moment before ctx's timer fires.
		if err != nil && (ctx.Err() != nil || errors.Is(err, pdc.ErrTimeout)) {
			// Of a file produced already, the wait is for a newer version.
			what := "it to be produced"
			if o.after > 0 {
				what = fmt.Sprintf("a version newer than %d", o.after)
			}
			if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return Consumed{}, fmt.Errorf("canceled while waiting for %s: %w", what, err)
			}
			if o.after > 0 {
				return Consumed{}, fmt.Errorf("no version newer than %d produced before the deadline: %w", o.after, err)
			}
			return Consumed{}, fmt.Errorf("not produced before the deadline: %w", err)
		}
	}
	if err != nil {
		return Consumed{}, err
	}
	res := Consumed{StagedFile: c.staged(rec), Local: dst, How: Cached}
	if dir.Current(rel, dst, rec) {
		return res, nil
	}
	release, tmp, err := dir.LockCopy(ctx, rel)
	if err != nil {
		return res, err
	}
	defer release()
	if held, ok := dir.Serves(rel, dst, rec); ok {
		// Another consumer on this host fetched it meanwhile, or, re-produced
		// since the lookup, installed the newer version: keep it (the owner
		// would refuse the old one; its inline bytes must not replace the new).
		res.StagedFile = c.staged(&held)
		return res, nil
	}
	if parent := filepath.Dir(dst); parent != dir.Real {
		if err := os.MkdirAll(parent, 0o700); err != nil {
			return res, err
		}
	}
	owner, _, err := c.server(int(rec.Owner))
	if err != nil {
		return res, fmt.Errorf("its owner: %w", err)
	}
	if rec.Host == c.stage.host || c.stage.shared {
		res.How, err = c.placeLocal(ctx, dir, rel, dst, tmp, rec, owner)
		return res, err
	}
	if rec.Inline() {
		res.How, res.Mode, res.Moved = Inline, "inline", int64(rec.Size)
		return res, staging.PlaceInline(dir, rel, dst, tmp, rec)
	}
	res.How = Fetched
	res.Mode, res.Moved, err = c.fetchStaged(ctx, dir, rel, dst, tmp, rec, owner, o)
	if err != nil && errors.Is(err, pdc.ErrUnavailable) && c.refresh(owner.Rank) {
		// The owner's server restarted at a new address: try it there.
		owner, _, _ = c.server(owner.Rank)
		res.Mode, res.Moved, err = c.fetchStaged(ctx, dir, rel, dst, tmp, rec, owner, o)
	}
	return res, err
}

// placeLocal puts the owner's file, which this host can see, into the
// consumer dir without a transfer (staging.PlaceLocal).
func (c *Client) placeLocal(ctx context.Context, dir staging.Dir, rel, dst, tmp string, rec *wire.StageRecord, owner Server) (How, error) {
	if owner.StageDir == "" {
		return "", fmt.Errorf("its owner %s serves no producer dir: %w", owner.Label(), pdc.ErrNotFound)
	}
	pdir, err := staging.OpenDir(owner.StageDir, "producer", false)
	if err != nil {
		return "", fmt.Errorf("the producer dir of its owner %s: %w", owner.Label(), err)
	}
	how, err := staging.PlaceLocal(ctx, dir, pdir, rel, dst, tmp, rec, c.stage.link)
	return How(how), err
}

// fetchStaged fetches the file from its owner into a temporary file next
// to dst, checks it and installs it (staging.Fetch).
func (c *Client) fetchStaged(ctx context.Context, dir staging.Dir, rel, dst, tmp string, rec *wire.StageRecord, owner Server, o *consumeOpts) (string, int64, error) {
	recv, err := c.receiver()
	if err != nil {
		return "", 0, err
	}
	mode := recv.Mode()
	if o.modeSet {
		mode = o.mode
	}
	shown := mode.String()
	if mode == dtl.ModeAuto {
		shown = "auto (pull)"
		if dtl.SameHost(owner.Addr) {
			shown = "auto (shm)"
		}
	}
	n, err := staging.Fetch(ctx, recv, dir, staging.Fetching{Rel: rel, Dst: dst, Tmp: tmp, Rec: rec,
		Owner: owner.Addr, OwnerLabel: owner.Label(), Mode: mode, Progress: o.progress})
	return shown, n, err
}

package slots

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Call sends one request to the server a slot goes to.
type Call func(ctx context.Context, m wire.Method, hdr []byte, payload [][]byte) error

// chunkBytes is how many bytes of a file one SlotFile request carries.
const chunkBytes = 4 << 20

// Sent is what sending a slot moved.
type Sent struct {
	Files int
	Bytes int64
}

// Send sends the data dir's copy of slot, at generation gen, to its new
// holder through call: every file in pieces, then a SlotCommit listing
// them, which the holder answers once it has checked them all and made
// the slot its own. Only then is the copy here removed. A failure leaves
// the copy here whole, to be sent again (the server retries while the
// holder is unreachable) or at the next start. A holder that answers it
// has the slot already (pdc.ErrExists: the commit of an earlier Send
// arrived, its answer did not) counts as a commit.
func (d DataDir) Send(ctx context.Context, slot int, gen uint64, call Call) (Sent, error) {
	var sent Sent
	src := d.Slot(slot)
	if s, g, err := d.Marker(src); err != nil || s != slot || g != gen {
		if err == nil {
			err = fmt.Errorf("%s holds slot %d at generation %d, the plan says slot %d at generation %d: %w", src, s, g, slot, gen, pdc.ErrInternal)
		}
		return sent, fmt.Errorf("send data slot %d: %w", slot, err)
	}
	names, err := d.fs.List(src)
	if err != nil {
		return sent, fmt.Errorf("send data slot %d: %w", slot, err)
	}
	if err := d.sendFiles(ctx, src, names, slot, gen, call, &sent); err != nil {
		if !errors.Is(err, pdc.ErrExists) {
			return sent, err
		}
		// The holder has committed this slot at this generation: an
		// earlier Send's commit arrived, its answer did not.
	}
	// The holder has it: this copy goes. Renamed first, so that a crash
	// midway leaves a .sent dir (removed at the next start), never a
	// partial slot dir.
	gone := src + ".sent"
	if err := d.fs.Rename(src, gone); err != nil {
		return sent, fmt.Errorf("data slot %d sent; remove the copy here: %w", slot, err)
	}
	if err := d.fs.SyncDir(d.path); err != nil {
		return sent, fmt.Errorf("data slot %d sent; remove the copy here: %w", slot, err)
	}
	if err := d.fs.RemoveAll(gone); err != nil {
		return sent, fmt.Errorf("data slot %d sent; remove the copy here: %w", slot, err)
	}
	return sent, nil
}

// sendFiles sends the files names of src, then the commit listing them.
func (d DataDir) sendFiles(ctx context.Context, src string, names []string, slot int, gen uint64, call Call, sent *Sent) error {
	commit := wire.SlotCommit{Slot: uint32(slot), Gen: gen}
	buf := make([]byte, chunkBytes)
	for _, name := range names {
		if name == markerFile || strings.HasSuffix(name, ".tmp") {
			// A .tmp file is what a crash left before a rename: never
			// the only copy of anything (regionstore).
			continue
		}
		if st, err := d.fs.Stat(filepath.Join(src, name)); err != nil || !st.Mode().IsRegular() {
			continue
		}
		sum, err := d.sendFile(ctx, filepath.Join(src, name), slot, gen, call, buf)
		if err != nil {
			return fmt.Errorf("send data slot %d: %w", slot, err)
		}
		commit.Files = append(commit.Files, sum)
		sent.Files++
		sent.Bytes += int64(sum.Size)
	}
	if err := call(ctx, wire.MethodSlotCommit, commit.Marshal(nil), nil); err != nil {
		return fmt.Errorf("send data slot %d: commit %d files: %w", slot, len(commit.Files), err)
	}
	return nil
}

func (d DataDir) sendFile(ctx context.Context, path string, slot int, gen uint64, call Call, buf []byte) (wire.SlotFileSum, error) {
	name := filepath.Base(path)
	f, err := d.fs.Open(path)
	if err != nil {
		return wire.SlotFileSum{}, err
	}
	defer f.Close()
	var off uint64
	var sum uint32
	for {
		n, err := io.ReadFull(f, buf)
		last := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !last {
			return wire.SlotFileSum{}, fmt.Errorf("read %s: %w", path, err)
		}
		sum = crc32.Update(sum, castagnoli, buf[:n])
		m := wire.SlotFile{Slot: uint32(slot), Gen: gen, Name: name, Off: off}
		if last {
			m.Last, m.Size, m.CRC = true, off+uint64(n), sum
		}
		var payload [][]byte
		if n > 0 {
			payload = [][]byte{buf[:n]}
		}
		if err := call(ctx, wire.MethodSlotFile, m.Marshal(nil), payload); err != nil {
			return wire.SlotFileSum{}, fmt.Errorf("file %s at offset %d: %w", name, off, err)
		}
		off += uint64(n)
		if last {
			return wire.SlotFileSum{Name: name, Size: off, CRC: sum}, nil
		}
	}
}

// Receiver takes the slots other servers send this one while the cluster
// starts (MethodSlotFile, MethodSlotCommit) into its data dir: each into
// data-<slot>.incoming, each file checked against its CRC-32C as it
// completes, then, at the commit, renamed to data-<slot> in one step.
type Receiver struct {
	dir   DataDir
	log   *slog.Logger
	ready chan struct{} // closed by Expect
	once  sync.Once

	mu struct {
		sync.Mutex
		epoch     uint64
		expect    map[int]uint64                      // slot -> generation
		files     map[int]map[string]wire.SlotFileSum // checked files, by slot
		committed map[int]bool
		closed    bool
	}
}

// NewReceiver makes the receiver of the data dir.
func (d DataDir) NewReceiver(log *slog.Logger) *Receiver {
	r := &Receiver{dir: d, log: log, ready: make(chan struct{})}
	r.mu.files = map[int]map[string]wire.SlotFileSum{}
	r.mu.committed = map[int]bool{}
	return r
}

// Register adds the receiving methods to srv.
func (r *Receiver) Register(srv *rpc.Server) {
	srv.Handle(wire.MethodSlotFile, r.file, rpc.WithPayload()) // a piece of a file
	srv.Handle(wire.MethodSlotCommit, r.commit)
}

// Expect tells the receiver which slots come (the plan's Receive); until
// then, requests wait. Later calls are ignored.
func (r *Receiver) Expect(p *wire.SlotPlan) {
	r.once.Do(func() {
		r.mu.Lock()
		r.mu.epoch = p.Epoch
		r.mu.expect = map[int]uint64{}
		for _, c := range p.Receive {
			r.mu.expect[int(c.Slot)] = c.Gen
		}
		r.mu.Unlock()
		close(r.ready)
	})
}

// Committed reports whether slot arrived whole.
func (r *Receiver) Committed(slot int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.committed[slot]
}

// Close makes the receiver refuse every request: once the cluster serves,
// a slot arriving would replace data written since.
func (r *Receiver) Close() {
	r.Expect(&wire.SlotPlan{})
	r.mu.Lock()
	r.mu.closed = true
	r.mu.Unlock()
}

// await waits for Expect, and checks that slot at gen is expected.
func (r *Receiver) await(ctx context.Context, slot int, gen uint64) error {
	select {
	case <-r.ready:
	case <-ctx.Done():
		return fmt.Errorf("data slot %d: waiting for this server's plan: %w", slot, pdc.CtxErr(ctx))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		return fmt.Errorf("data slot %d: data slots are received only while the cluster starts: %w", slot, pdc.ErrInvalid)
	}
	if g, ok := r.mu.expect[slot]; !ok || g != gen {
		return fmt.Errorf("data slot %d at generation %d is not one this server was told to receive: %w", slot, gen, pdc.ErrInvalid)
	}
	if r.mu.committed[slot] {
		return fmt.Errorf("data slot %d: already received: %w", slot, pdc.ErrExists)
	}
	return nil
}

func validName(name string) bool {
	return name != "" && name != "." && name != ".." && name != markerFile && filepath.Base(name) == name &&
		!strings.ContainsAny(name, "/\\\x00") && !strings.HasSuffix(name, ".tmp")
}

func (r *Receiver) file(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.SlotFile
	if err := m.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	slot := int(m.Slot)
	if err := r.await(ctx, slot, m.Gen); err != nil {
		return nil, err
	}
	if !validName(m.Name) {
		return nil, fmt.Errorf("data slot %d: file name %q: %w", slot, m.Name, pdc.ErrInvalid)
	}
	in := r.dir.Slot(slot) + ".incoming"
	path := filepath.Join(in, m.Name)
	if err := r.write(in, path, m, req.Payload); err != nil {
		return nil, fmt.Errorf("data slot %d: receive %s: %w", slot, path, err)
	}
	if !m.Last {
		return &rpc.Response{}, nil
	}
	if err := r.checkFile(path, m.Size, m.CRC); err != nil {
		return nil, fmt.Errorf("data slot %d: %w", slot, err)
	}
	r.mu.Lock()
	if r.mu.files[slot] == nil {
		r.mu.files[slot] = map[string]wire.SlotFileSum{}
	}
	r.mu.files[slot][m.Name] = wire.SlotFileSum{Name: m.Name, Size: m.Size, CRC: m.CRC}
	r.mu.Unlock()
	return &rpc.Response{}, nil
}

// write puts one piece of a file in place: the first creates the file,
// the others follow it in order.
func (r *Receiver) write(in, path string, m wire.SlotFile, data []byte) error {
	if err := r.dir.fs.MkdirAll(in, 0o700); err != nil {
		return err
	}
	flags := os.O_WRONLY
	if m.Off == 0 {
		flags |= os.O_CREATE | os.O_TRUNC
	}
	f, err := r.dir.fs.OpenFile(path, flags, 0o600)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err == nil && uint64(st.Size()) != m.Off {
		err = fmt.Errorf("piece at offset %d, the file has %d bytes: %w", m.Off, st.Size(), pdc.ErrProtocol)
	}
	if err == nil && len(data) > 0 {
		_, err = f.WriteAt(data, int64(m.Off))
	}
	if err == nil && m.Last {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkFile reads path back and checks its size and CRC-32C.
func (r *Receiver) checkFile(path string, size uint64, sum uint32) error {
	f, err := r.dir.fs.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("check %s: %w", path, err)
	}
	if uint64(n) != size {
		return fmt.Errorf("%s: %d bytes arrived, the sender has %d: %w", path, n, size, pdc.ErrChecksum)
	}
	if got := h.Sum32(); got != sum {
		return fmt.Errorf("%s: crc32c %08x, the sender's %08x: %w", path, got, sum, pdc.ErrChecksum)
	}
	return nil
}

func (r *Receiver) commit(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.SlotCommit
	if err := m.Unmarshal(req.Header); err != nil {
		return nil, err
	}
	slot := int(m.Slot)
	if err := r.await(ctx, slot, m.Gen); err != nil {
		return nil, err
	}
	in := r.dir.Slot(slot) + ".incoming"
	if err := r.dir.fs.MkdirAll(in, 0o700); err != nil { // a slot of no files
		return nil, fmt.Errorf("data slot %d: %w", slot, err)
	}
	r.mu.Lock()
	got := r.mu.files[slot]
	epoch := r.mu.epoch
	r.mu.Unlock()
	// Exactly the sender's files, each checked as it completed.
	want := map[string]bool{}
	for _, f := range m.Files {
		want[f.Name] = true
		if g, ok := got[f.Name]; !ok || g != f {
			return nil, fmt.Errorf("data slot %d: file %s (%d bytes, crc32c %08x) did not arrive whole: %w", slot, f.Name, f.Size, f.CRC, pdc.ErrChecksum)
		}
	}
	names, err := r.dir.fs.List(in)
	if err != nil {
		return nil, fmt.Errorf("data slot %d: %w", slot, err)
	}
	for _, name := range names {
		if !want[name] {
			return nil, fmt.Errorf("data slot %d: %s holds %s, which the sender does not have: %w", slot, in, name, pdc.ErrProtocol)
		}
	}
	if err := r.dir.SetMarker(in, slot, m.Gen); err != nil {
		return nil, fmt.Errorf("data slot %d: %w", slot, err)
	}
	dst := r.dir.Slot(slot)
	if _, err := r.dir.fs.Stat(dst); err == nil {
		// An older or duplicate copy here: kept, out of the way.
		_, g, _ := r.dir.Marker(dst)
		aside, err := r.dir.SetAside(slot, g, epoch)
		if err != nil {
			return nil, err
		}
		r.log.Warn("set aside a copy of a data slot that another server's copy replaces", "slot", slot, "generation", g, "path", aside)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("data slot %d: %w", slot, err)
	}
	if err := r.dir.fs.Rename(in, dst); err != nil {
		return nil, fmt.Errorf("data slot %d: %w", slot, err)
	}
	if err := r.dir.fs.SyncDir(r.dir.path); err != nil {
		return nil, fmt.Errorf("data slot %d: %w", slot, err)
	}
	r.mu.Lock()
	r.mu.committed[slot] = true
	delete(r.mu.files, slot)
	r.mu.Unlock()
	r.log.Info("received a data slot", "slot", slot, "generation", m.Gen, "files", len(m.Files))
	return &rpc.Response{}, nil
}

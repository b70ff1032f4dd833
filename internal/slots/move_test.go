package slots

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
)

// receiver serves a Receiver of data dir dir on loopback and returns a
// Call to it.
func receiver(t *testing.T, dir string) (*Receiver, Call) {
	t.Helper()
	return receiverOn(t, dd(dir))
}

func receiverOn(t *testing.T, d DataDir) (*Receiver, Call) {
	t.Helper()
	r := d.NewReceiver(slog.New(slog.DiscardHandler))
	srv := rpc.NewServer(rpc.ServerConfig{Logger: slog.New(slog.DiscardHandler)})
	r.Register(srv)
	ln, err := rpc.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	p := rpc.NewPool(rpc.Addr(ln.Addr()), 1, rpc.DialOptions{Label: "receiver"})
	t.Cleanup(func() { p.Close() })
	return r, func(ctx context.Context, m wire.Method, hdr []byte, payload [][]byte) error {
		_, err := p.Call(ctx, m, hdr, payload, nil)
		return err
	}
}

// slotDir makes slot's dir under dir with files of the given sizes.
func slotDir(t *testing.T, dir string, slot int, gen uint64, sizes map[string]int) map[string][]byte {
	t.Helper()
	d := filepath.Join(dir, SlotDir(slot))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := dd(dir).SetMarker(d, slot, gen); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	rng := rand.New(rand.NewPCG(uint64(slot), gen))
	for name, n := range sizes {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if err := os.WriteFile(filepath.Join(d, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	return files
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func TestSendMovesASlotWhole(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	files := slotDir(t, src, 3, 7, map[string]int{
		"0000000000000001.off": chunkBytes*2 + 12345, // several pieces
		"0000000000000002.reg": 100,
		"0000000000000002.idx": 0,
	})
	// A leftover of a crash is not sent.
	_ = os.WriteFile(filepath.Join(src, SlotDir(3), "0000000000000009.off.tmp"), []byte("x"), 0o644)
	// The holder has an older copy of its own: set aside, not lost.
	_ = slotDir(t, dst, 3, 2, map[string]int{"old": 10})
	r, call := receiver(t, dst)
	r.Expect(&wire.SlotPlan{Epoch: 8, Receive: []wire.SlotCopy{{Slot: 3, Gen: 7}}})
	sent, err := dd(src).Send(ctx(t), 3, 7, call)
	if err != nil {
		t.Fatal(err)
	}
	if sent.Files != 3 || sent.Bytes != chunkBytes*2+12345+100 {
		t.Fatalf("sent %+v", sent)
	}
	if !r.Committed(3) {
		t.Fatal("not committed")
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dst, SlotDir(3), name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes, %v; want %d", name, len(got), err, len(want))
		}
	}
	if s, g, err := dd(dst).Marker(filepath.Join(dst, SlotDir(3))); err != nil || s != 3 || g != 7 {
		t.Fatalf("marker at the holder: %d %d %v", s, g, err)
	}
	if _, err := os.Stat(filepath.Join(src, SlotDir(3))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the sender kept its copy: %v", err)
	}
	entries, _ := os.ReadDir(dst)
	var aside bool
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), SlotDir(3)+".aside-2-8") {
			aside = true
			if _, err := os.Stat(filepath.Join(dst, e.Name(), "old")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !aside {
		t.Fatalf("the holder's older copy is gone: %v", entries)
	}
}

func TestSendCorruptedInTransitKeepsTheSource(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	files := slotDir(t, src, 1, 3, map[string]int{"a": 5000, "b": 70})
	r, call := receiver(t, dst)
	r.Expect(&wire.SlotPlan{Epoch: 4, Receive: []wire.SlotCopy{{Slot: 1, Gen: 3}}})
	flip := func(ctx context.Context, m wire.Method, hdr []byte, payload [][]byte) error {
		if m == wire.MethodSlotFile && len(payload) > 0 && len(payload[0]) > 100 {
			p := bytes.Clone(payload[0])
			p[99] ^= 1
			payload = [][]byte{p}
		}
		return call(ctx, m, hdr, payload)
	}
	_, err := dd(src).Send(ctx(t), 1, 3, flip)
	if !errors.Is(err, pdc.ErrChecksum) {
		t.Fatalf("send of a corrupted file: %v", err)
	}
	if r.Committed(1) {
		t.Fatal("committed")
	}
	if _, err := os.Stat(filepath.Join(dst, SlotDir(1))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a slot dir at the holder: %v", err)
	}
	for name, want := range files {
		if got, err := os.ReadFile(filepath.Join(src, SlotDir(1), name)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("source %s changed: %v", name, err)
		}
	}
	// The next start finds the partial copy and removes it.
	if _, _, err := dd(dst).Scan(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dst, SlotDir(1)+".incoming")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("partial copy left: %v", err)
	}
}

func TestReceiverRefusesWhatItWasNotTold(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	slotDir(t, src, 2, 1, map[string]int{"a": 10})
	r, call := receiver(t, dst)
	r.Expect(&wire.SlotPlan{Epoch: 2, Receive: []wire.SlotCopy{{Slot: 2, Gen: 5}}})
	if _, err := dd(src).Send(ctx(t), 2, 1, call); !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("a generation not planned: %v", err)
	}
	bad := wire.SlotFile{Slot: 2, Gen: 5, Name: "../escape", Last: true}
	if err := call(ctx(t), wire.MethodSlotFile, bad.Marshal(nil), nil); !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("a path for a name: %v", err)
	}
	r.Close()
	ok := wire.SlotFile{Slot: 2, Gen: 5, Name: "a", Last: true}
	if err := call(ctx(t), wire.MethodSlotFile, ok.Marshal(nil), nil); !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("after the start: %v", err)
	}
}

// The holder's disk fills part way through a slot, and then fails to
// sync: each time the send fails with the error, nothing is committed and
// the sender's copy stays whole for the next start.
func TestSendToAFailingDiskKeepsTheSource(t *testing.T) {
	for _, c := range []struct {
		rule vfs.Rule
		want error
	}{
		{vfs.Rule{Ops: vfs.OpWrite, Path: ".incoming", After: 1, Short: true}, pdc.ErrNoSpace},
		{vfs.Rule{Ops: vfs.OpSync, Path: ".incoming", After: 1, Err: syscall.EIO}, pdc.ErrIO},
		{vfs.Rule{Ops: vfs.OpRename, Path: ".incoming"}, pdc.ErrNoSpace},
	} {
		rule := c.rule
		src, dst := t.TempDir(), t.TempDir()
		files := slotDir(t, src, 2, 3, map[string]int{"a": 3 * chunkBytes / 2, "b": 5000, "c": 1})
		fsys := vfs.NewFaulty(vfs.Default)
		fsys.Inject(rule)
		r, call := receiverOn(t, NewDataDir(fsys, dst))
		r.Expect(&wire.SlotPlan{Epoch: 4, Receive: []wire.SlotCopy{{Slot: 2, Gen: 3}}})
		_, err := dd(src).Send(ctx(t), 2, 3, call)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), "data slot 2") {
			t.Fatalf("%v: send: %v", rule.Ops, err)
		}
		if r.Committed(2) || dd(dst).HasSlot(2) {
			t.Fatalf("%v: committed", rule.Ops)
		}
		for name, want := range files {
			if got, err := os.ReadFile(filepath.Join(src, SlotDir(2), name)); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%v: source %s changed: %v", rule.Ops, name, err)
			}
		}
	}
}

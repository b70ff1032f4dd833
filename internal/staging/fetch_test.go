package staging

import (
	"context"
	"errors"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// fixedOwner serves payload for every key, instead of the file the key
// names: an owner that sends what a test wants.
func fixedOwner(t *testing.T, payload []byte) string {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := dtl.NewSender(dtl.SenderConfig{ShmDir: t.TempDir(), Logger: quiet,
		Resolve: func(context.Context, []byte) (dtl.Source, error) { return dtl.Bytes(payload), nil }})
	if err != nil {
		t.Fatal(err)
	}
	srv := rpc.NewServer(rpc.ServerConfig{Logger: quiet})
	s.Register(srv)
	ln, err := rpc.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(served) }()
	t.Cleanup(func() {
		srv.Close()
		<-served
		s.Close()
	})
	return rpc.Addr(ln.Addr())
}

// An owner that sends more bytes than the record's size is refused at the
// first byte past it, by every mode: the consume used to write all it was
// sent into the consumer dir (gigabytes if the owner said so, filling the
// file system under every other consume there) before its size check
// refused the file.
func TestFetchTakesNoMoreThanTheRecordsSize(t *testing.T) {
	const size = 1 << 20
	sent := make([]byte, 16<<20)
	owner := fixedOwner(t, sent)
	root := t.TempDir()
	d, err := OpenDir(root, "consumer", false)
	if err != nil {
		t.Fatal(err)
	}
	recv, err := dtl.NewReceiver(dtl.ReceiverConfig{Mode: dtl.ModePull})
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	rec := &wire.StageRecord{Path: "f", Version: 1, Host: "h", Size: size, CRC: crc32.Checksum(sent[:size], Table)}
	for _, mode := range []dtl.Mode{dtl.ModeStream, dtl.ModePull, dtl.ModePush, dtl.ModeShm} {
		var most int64
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := Fetch(ctx, recv, d, Fetching{Rel: "f", Dst: filepath.Join(d.Real, "f"), Tmp: filepath.Join(d.Real, ".f.tmp"),
			Rec: rec, Owner: owner, OwnerLabel: "the hostile owner", Mode: mode,
			Progress: func(done, _ int64) { most = max(most, done) }})
		cancel()
		if !errors.Is(err, pdc.ErrChecksum) {
			t.Errorf("%s: %d bytes sent for a record of %d: %v, want ErrChecksum", mode, len(sent), size, err)
		}
		if most > size {
			t.Errorf("%s: %d bytes written into the consumer dir for a record of %d", mode, most, size)
		}
		for _, p := range []string{"f", ".f.tmp"} {
			if _, err := os.Lstat(filepath.Join(d.Real, p)); err == nil {
				t.Errorf("%s: the refused fetch left %s", mode, p)
			}
		}
	}
}

// A fetch whose context ends part-way stops there and fails, in every
// mode. shm copies the owner's file, local I/O that no socket deadline
// bounds: it used to copy on to the end, past the caller's deadline by as
// long as the file took (5 s for 2 GB here, with a 300 ms --timeout), and
// the consume then reported success.
func TestFetchStopsWhenItsContextEnds(t *testing.T) {
	const size = 64 << 20
	sent := make([]byte, size)
	owner := fixedOwner(t, sent)
	d, err := OpenDir(t.TempDir(), "consumer", false)
	if err != nil {
		t.Fatal(err)
	}
	recv, err := dtl.NewReceiver(dtl.ReceiverConfig{Mode: dtl.ModePull})
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	rec := &wire.StageRecord{Path: "f", Version: 1, Host: "h", Size: size, CRC: crc32.Checksum(sent, Table)}
	for _, mode := range []dtl.Mode{dtl.ModeStream, dtl.ModePull, dtl.ModePush, dtl.ModeShm} {
		var most int64
		ctx, cancel := context.WithCancel(context.Background())
		_, err := Fetch(ctx, recv, d, Fetching{Rel: "f", Dst: filepath.Join(d.Real, "f"), Tmp: filepath.Join(d.Real, ".f.tmp"),
			Rec: rec, Owner: owner, OwnerLabel: "the owner", Mode: mode,
			Progress: func(done, _ int64) {
				most = max(most, done)
				cancel() // the caller gives up once bytes arrive
			}})
		cancel()
		if !errors.Is(err, pdc.ErrCanceled) {
			t.Errorf("%s: canceled after the first bytes arrived: %v, want ErrCanceled", mode, err)
		}
		if most >= size {
			t.Errorf("%s: all %d bytes written after the fetch was canceled", mode, most)
		}
		if _, err := os.Lstat(filepath.Join(d.Real, "f")); err == nil {
			t.Errorf("%s: the canceled fetch installed its file", mode)
			os.Remove(filepath.Join(d.Real, "f"))
		}
	}
}

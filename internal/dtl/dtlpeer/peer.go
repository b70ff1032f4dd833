package dtlpeer

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/internal/rpc"
)

// Keys the peer answers:
//
//	pattern:N   N pattern bytes from a memory file (a file source)
//	buf:N       N pattern bytes from a buffer (a buffer source)
//	hang        never answers until the fetch's context ends
//	stats       the peer's Stats as JSON
//	wait-hang:N answers (empty) once N fetches of "hang" are waiting
//
// Any other key is not found.

// Fill writes the pattern for the bytes at offset off onward into b.
func Fill(b []byte, off int64) {
	i := 0
	for ; i < len(b) && (off+int64(i))%8 != 0; i++ {
		b[i] = patternByte(off + int64(i))
	}
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], word((off+int64(i))/8))
	}
	for ; i < len(b); i++ {
		b[i] = patternByte(off + int64(i))
	}
}

func word(k int64) uint64 { return uint64(k)*0x9E3779B97F4A7C15 + 1 }

func patternByte(i int64) byte { return byte(word(i/8) >> (8 * (i % 8))) }

// Check reports the first byte of b that is not the pattern at off.
func Check(b []byte, off int64) error {
	i := 0
	for ; i < len(b) && (off+int64(i))%8 != 0; i++ {
		if b[i] != patternByte(off+int64(i)) {
			return mismatch(b, off, i)
		}
	}
	for ; i+8 <= len(b); i += 8 {
		if binary.LittleEndian.Uint64(b[i:]) != word((off+int64(i))/8) {
			for j := i; j < i+8; j++ {
				if b[j] != patternByte(off+int64(j)) {
					return mismatch(b, off, j)
				}
			}
		}
	}
	for ; i < len(b); i++ {
		if b[i] != patternByte(off+int64(i)) {
			return mismatch(b, off, i)
		}
	}
	return nil
}

func mismatch(b []byte, off int64, i int) error {
	return fmt.Errorf("byte %d is %#02x, want %#02x", off+int64(i), b[i], patternByte(off+int64(i)))
}

// Config configures a peer.
type Config struct {
	// Addr to serve RPC on ("127.0.0.1:0" default, or "unix:/path").
	Addr string
	// Secret, if set, is required of clients.
	Secret []byte
	// ShmDir for the shm socket.
	ShmDir string
	// HandleTTL and MaxEndpoints go to the sender.
	HandleTTL    time.Duration
	MaxEndpoints int
	Logger       *slog.Logger
}

// Peer is a running sender.
type Peer struct {
	Sender *dtl.Sender
	srv    *rpc.Server
	ln     net.Listener
	done   chan error

	mu      sync.Mutex
	files   map[int64]*os.File
	bufs    map[int64][]byte
	hanging int
	changed chan struct{} // closed and replaced when hanging changes
}

// Stats is what the "stats" key returns.
type Stats struct {
	Sender   dtl.SenderStats
	Hanging  int
	BulkAddr string
}

// Start serves until Close.
func Start(cfg Config) (*Peer, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	p := &Peer{files: map[int64]*os.File{}, bufs: map[int64][]byte{}, done: make(chan error, 1), changed: make(chan struct{})}
	s, err := dtl.NewSender(dtl.SenderConfig{Resolve: p.resolve, ShmDir: cfg.ShmDir, HandleTTL: cfg.HandleTTL,
		MaxEndpoints: cfg.MaxEndpoints, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	p.Sender = s
	p.srv = rpc.NewServer(rpc.ServerConfig{Secret: cfg.Secret, Logger: cfg.Logger})
	s.Register(p.srv)
	p.ln, err = rpc.Listen(cfg.Addr)
	if err != nil {
		s.Close()
		return nil, err
	}
	go func() { p.done <- p.srv.Serve(p.ln) }()
	return p, nil
}

// Addr is the peer's RPC address.
func (p *Peer) Addr() string { return rpc.Addr(p.ln.Addr()) }

// Close stops the peer and waits for it.
func (p *Peer) Close() error {
	p.srv.Close()
	<-p.done
	p.Sender.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.files {
		f.Close()
	}
	p.files, p.bufs = map[int64]*os.File{}, map[int64][]byte{}
	return nil
}

func (p *Peer) resolve(ctx context.Context, key []byte) (dtl.Source, error) {
	k := string(key)
	switch {
	case k == "hang":
		p.hang(1)
		defer p.hang(-1)
		<-ctx.Done()
		return dtl.Source{}, ctx.Err()
	case strings.HasPrefix(k, "wait-hang:"):
		n, err := size(k)
		if err != nil {
			return dtl.Source{}, err
		}
		for {
			p.mu.Lock()
			h, ch := p.hanging, p.changed
			p.mu.Unlock()
			if int64(h) >= n {
				return dtl.Bytes(nil), nil
			}
			select {
			case <-ch:
			case <-ctx.Done():
				return dtl.Source{}, ctx.Err()
			}
		}
	case k == "stats":
		p.mu.Lock()
		st := Stats{Sender: p.Sender.Stats(), Hanging: p.hanging, BulkAddr: p.Sender.BulkAddr()}
		p.mu.Unlock()
		b, _ := json.Marshal(st)
		return dtl.Bytes(b), nil
	case strings.HasPrefix(k, "pattern:"):
		n, err := size(k)
		if err != nil {
			return dtl.Source{}, err
		}
		f, err := p.file(n)
		if err != nil {
			return dtl.Source{}, err
		}
		return dtl.FileSection(f, 0, n), nil
	case strings.HasPrefix(k, "buf:"):
		n, err := size(k)
		if err != nil {
			return dtl.Source{}, err
		}
		return dtl.Bytes(p.buf(n)), nil
	}
	return dtl.Source{}, fmt.Errorf("key %q: %w", k, dtl.ErrNotFound)
}

func (p *Peer) hang(d int) {
	p.mu.Lock()
	p.hanging += d
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

func size(k string) (int64, error) {
	_, s, _ := strings.Cut(k, ":")
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("key %q: bad size: %w", k, pdc.ErrInvalid)
	}
	return n, nil
}

// file is a memory file holding n pattern bytes, made once per size.
func (p *Peer) file(n int64) (*os.File, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.files[n]; f != nil {
		return f, nil
	}
	f, err := memfd(fmt.Sprintf("dtlpeer-%d", n))
	if err != nil {
		return nil, err
	}
	chunk := make([]byte, 4<<20)
	for off := int64(0); off < n; off += int64(len(chunk)) {
		b := chunk[:min(int64(len(chunk)), n-off)]
		Fill(b, off)
		if _, err := f.WriteAt(b, off); err != nil {
			f.Close()
			return nil, fmt.Errorf("filling the %d-byte pattern file: %w", n, err)
		}
	}
	if err := seal(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("sealing the %d-byte pattern file: %w", n, err)
	}
	p.files[n] = f
	return f, nil
}

func (p *Peer) buf(n int64) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b, ok := p.bufs[n]; ok {
		return b
	}
	b := make([]byte, n)
	Fill(b, 0)
	p.bufs[n] = b
	return b
}

// Main runs a peer as a process of its own: it prints its address on
// stdout and serves until stdin closes (so that it cannot outlive its
// parent) or the process is killed.
func Main(cfg Config) error {
	p, err := Start(cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	fmt.Fprintln(os.Stdout, p.Addr())
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	return nil
}

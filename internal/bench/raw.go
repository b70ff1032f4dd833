package bench

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// rawServer runs one goroutine per accepted connection, nothing in
// between: the scaffolding of the raw ceilings' servers.
type rawServer struct {
	lns    []net.Listener
	handle func(net.Conn)
	wg     sync.WaitGroup
	mu     struct {
		sync.Mutex
		conns map[net.Conn]struct{}
	}
}

func newRawServer(handle func(net.Conn), lns ...net.Listener) *rawServer {
	s := &rawServer{lns: lns, handle: handle}
	s.mu.conns = make(map[net.Conn]struct{})
	for _, ln := range lns {
		s.wg.Add(1)
		go s.accept(ln)
	}
	return s
}

func (s *rawServer) accept(ln net.Listener) {
	defer s.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		s.mu.Lock()
		s.mu.conns[nc] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(nc)
			nc.Close()
			s.mu.Lock()
			delete(s.mu.conns, nc)
			s.mu.Unlock()
		}()
	}
}

// Close stops the server and waits for its goroutines.
func (s *rawServer) Close() error {
	for _, ln := range s.lns {
		ln.Close()
	}
	s.mu.Lock()
	for nc := range s.mu.conns {
		nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// EchoServer is the raw ceiling: it writes back whatever it reads, with
// nothing in between.
type EchoServer struct{ *rawServer }

// NewEchoServer serves on ln until Close.
func NewEchoServer(ln net.Listener) *EchoServer {
	return &EchoServer{newRawServer(echo, ln)}
}

// Addr is the server's address.
func (s *EchoServer) Addr() string { return s.lns[0].Addr().String() }

func echo(nc net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := nc.Read(buf)
		if n > 0 {
			if _, werr := nc.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// dialRaw connects to addr. The dial is not bounded by a measuring
// window's context: setting up is not what is measured.
func dialRaw(ctx context.Context, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	_ = nc.(*net.TCPConn).SetNoDelay(true)
	return nc, nil
}

// rawPingPong sends msg-sized messages one at a time and waits for each
// echo; it returns each round trip's duration via record.
func rawPingPong(ctx context.Context, addr string, size int, loop func(op func() error) error) error {
	nc, err := dialRaw(ctx, addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	msg := make([]byte, size)
	in := make([]byte, size)
	return loop(func() error {
		if _, err := nc.Write(msg); err != nil {
			return err
		}
		_, err := io.ReadFull(nc, in)
		return err
	})
}

// RawRoundTrips makes n sequential round trips of size bytes to the echo
// server at addr: the raw ceiling for one client process of several. It
// connects and makes one round trip first, then calls ready (which may
// wait for a start signal).
func RawRoundTrips(ctx context.Context, addr string, size, n int, ready func() error) error {
	return rawPingPong(ctx, addr, size, func(op func() error) error {
		if err := op(); err != nil {
			return err
		}
		if err := ready(); err != nil {
			return err
		}
		for range n {
			if err := op(); err != nil {
				return err
			}
		}
		return nil
	})
}

// rawPipelined keeps window messages in flight on nc, one write system
// call per message, and counts echoes until ctx ends, which closes nc.
func rawPipelined(ctx context.Context, nc net.Conn, size, window int) (int64, error) {
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	credits := make(chan struct{}, window)
	for range window {
		credits <- struct{}{}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		msg := make([]byte, size)
		for {
			select {
			case <-credits:
			case <-ctx.Done():
				return
			}
			if _, err := nc.Write(msg); err != nil {
				return
			}
		}
	}()
	br := bufio.NewReaderSize(nc, 64<<10)
	in := make([]byte, size)
	var n int64
	for {
		if _, err := io.ReadFull(br, in); err != nil {
			break
		}
		n++
		credits <- struct{}{}
	}
	wg.Wait()
	if ctx.Err() == nil {
		return n, errors.New("raw pipelined: connection ended early")
	}
	return n, nil
}

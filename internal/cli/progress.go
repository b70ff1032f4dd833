package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// statusTick is how often a status line is redrawn.
const statusTick = 250 * time.Millisecond

// status is a live one-line status of a long command on a terminal: what
// it is doing and for how long, redrawn in place by a goroutine of its
// own until stop. Off a terminal (a pipe, a file) it draws nothing, and
// its print methods are plain writes: logs and CI output stay clean.
// Safe for concurrent use.
type status struct {
	w     io.Writer
	start time.Time
	stopc chan struct{} // nil: off
	done  chan struct{}
	once  sync.Once

	mu    sync.Mutex
	msg   string // guarded by mu
	drawn int    // length of the line on the terminal; guarded by mu
}

// newStatus starts a status line on w if on (isTerminal, usually).
func newStatus(w io.Writer, on bool, msg string) *status {
	s := &status{w: w, start: time.Now(), msg: msg}
	if on {
		s.stopc, s.done = make(chan struct{}), make(chan struct{})
		go s.loop()
	}
	return s
}

func (s *status) loop() {
	defer close(s.done)
	t := time.NewTicker(statusTick)
	defer t.Stop()
	s.mu.Lock()
	s.drawLocked()
	s.mu.Unlock()
	for {
		select {
		case <-t.C:
			s.mu.Lock()
			s.drawLocked()
			s.mu.Unlock()
		case <-s.stopc:
			s.mu.Lock()
			s.clearLocked()
			s.mu.Unlock()
			return
		}
	}
}

// set changes what the line says.
func (s *status) set(format string, args ...any) {
	if s.stopc == nil {
		return
	}
	s.mu.Lock()
	s.msg = fmt.Sprintf(format, args...)
	s.mu.Unlock()
}

// around runs print, which writes whole lines to the terminal, with the
// status line out of its way, and draws it again below them.
func (s *status) around(print func()) {
	if s.stopc == nil {
		print()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearLocked()
	print()
	select {
	case <-s.stopc: // stopping: the line stays cleared
	default:
		s.drawLocked()
	}
}

// Write writes p, whole lines, to the status's writer around the status
// line: a status is the writer for other output of its command.
func (s *status) Write(p []byte) (n int, err error) {
	s.around(func() { n, err = s.w.Write(p) })
	return n, err
}

// printf writes a line to the status's writer, around the status line.
func (s *status) printf(format string, args ...any) {
	s.around(func() { fmt.Fprintf(s.w, format, args...) })
}

func (s *status) drawLocked() {
	line := fmt.Sprintf("%s ... %s", s.msg, time.Since(s.start).Round(time.Second))
	pad := max(s.drawn-len(line), 0)
	fmt.Fprintf(s.w, "\r%s%s", line, strings.Repeat(" ", pad))
	s.drawn = len(line)
}

func (s *status) clearLocked() {
	if s.drawn > 0 {
		fmt.Fprintf(s.w, "\r%s\r", strings.Repeat(" ", s.drawn))
		s.drawn = 0
	}
}

// stop clears the line and waits for its goroutine. Idempotent.
func (s *status) stop() {
	if s.stopc == nil {
		return
	}
	s.once.Do(func() { close(s.stopc) })
	<-s.done
}

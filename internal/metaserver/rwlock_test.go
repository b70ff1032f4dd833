package metaserver

import (
	"context"
	"errors"
	"testing"
)

// waitsOf makes l report each acquire that joins its queue on the
// returned channel.
func waitsOf(t *testing.T, l *rwLock) <-chan lockKind {
	t.Helper()
	ch := make(chan lockKind, 16)
	h := func(k lockKind) { ch <- k }
	l.waitHook.Store(&h)
	t.Cleanup(func() { l.waitHook.Store(nil) })
	return ch
}

// done is a context already ended: an acquire that must wait fails at
// once, one that need not takes the lock.
func done() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// A waiting writer keeps new RLock holders out (they commit under the
// lock, and could hold it through fsyncs for ever), and lets readers past
// only while such a holder keeps it out anyway; once only readers are in
// its way, new readers queue behind it.
func TestRWLockWriterWaitingBetweenKinds(t *testing.T) {
	var l rwLock
	waits := waitsOf(t, &l)
	bg := context.Background()
	if err := l.RLock(bg); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- l.Lock(bg) }()
	if k := <-waits; k != lockWrite {
		t.Fatalf("queued: kind %d, want the writer", k)
	}
	if err := l.RLock(done()); !errors.Is(err, context.Canceled) {
		t.Fatalf("RLock with a writer waiting: %v, want it to wait (context canceled)", err)
	}
	<-waits
	if err := l.ReadLock(done()); err != nil {
		t.Fatalf("ReadLock with a writer waiting behind an RLock holder: %v, want it let in", err)
	}
	l.RUnlock()
	// Only the reader is in the writer's way now.
	if err := l.ReadLock(done()); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadLock with a writer waiting behind readers only: %v, want it to wait", err)
	}
	<-waits
	l.ReadUnlock()
	if err := <-got; err != nil {
		t.Fatalf("the writer: %v", err)
	}
	if err := l.ReadLock(done()); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadLock with a writer holding: %v, want it to wait", err)
	}
	<-waits
	l.Unlock()
	if err := l.Lock(done()); err != nil {
		t.Fatalf("Lock of a free lock with a context done: %v, want it taken", err)
	}
	l.Unlock()
}

// A writer that gives up lets in the shared holders it kept out, and one
// given the lock as its context ended holds it.
func TestRWLockWriterGivingUpLetsOthersIn(t *testing.T) {
	var l rwLock
	waits := waitsOf(t, &l)
	bg := context.Background()
	if err := l.RLock(bg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	wrote := make(chan error, 1)
	go func() { wrote <- l.Lock(ctx) }()
	<-waits
	shared := make(chan error, 1)
	go func() { shared <- l.RLock(bg) }()
	<-waits
	cancel()
	if err := <-wrote; !errors.Is(err, context.Canceled) {
		t.Fatalf("the writer whose context ended: %v, want the context's error", err)
	}
	if err := <-shared; err != nil {
		t.Fatalf("the shared holder queued behind it: %v", err)
	}
	l.RUnlock()
	l.RUnlock()
	// Free again: a writer takes it at once.
	if err := l.Lock(done()); err != nil {
		t.Fatalf("Lock once every holder left: %v", err)
	}
	l.Unlock()
}

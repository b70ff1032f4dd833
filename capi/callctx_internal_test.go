package capi

import (
	"context"
	"errors"
	"testing"
	"time"
)

type callCtxKey struct{}

// A call's context keeps context.WithDeadline's rules, and makes its timer
// only when something waits for Done.
func TestCallCtx(t *testing.T) {
	parent := context.WithValue(context.Background(), callCtxKey{}, "v")
	t.Run("deadline seen by Err without a timer", func(t *testing.T) {
		ctx, cancel := withDeadlineLazy(parent, time.Now().Add(20*time.Millisecond))
		defer cancel()
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > 20*time.Millisecond {
			t.Fatalf("deadline %v %v", d, ok)
		}
		if ctx.Err() != nil || ctx.Value(callCtxKey{}) != "v" {
			t.Fatalf("err %v, value %v", ctx.Err(), ctx.Value(callCtxKey{}))
		}
		time.Sleep(30 * time.Millisecond)
		if c := ctx.(*callCtx); c.timer != nil || c.done != nil {
			t.Fatal("a timer was made with nobody waiting for Done")
		}
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("err %v after the deadline", ctx.Err())
		}
		select {
		case <-ctx.Done():
		default:
			t.Fatal("Done open after Err said the deadline passed")
		}
		cancel()
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			t.Fatalf("err %v, cause %v after cancel", ctx.Err(), context.Cause(ctx))
		}
	})
	t.Run("Done closes at the deadline", func(t *testing.T) {
		ctx, cancel := withDeadlineLazy(parent, time.Now().Add(10*time.Millisecond))
		defer cancel()
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done still open long after the deadline")
		}
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("err %v", ctx.Err())
		}
	})
	t.Run("a deadline already passed", func(t *testing.T) {
		ctx, cancel := withDeadlineLazy(parent, time.Now().Add(-time.Second))
		defer cancel()
		<-ctx.Done()
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("err %v", ctx.Err())
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := withDeadlineLazy(parent, time.Now().Add(time.Hour))
		done := ctx.Done()
		cancel()
		<-done
		if !errors.Is(ctx.Err(), context.Canceled) || ctx.(*callCtx).timer != nil {
			t.Fatalf("err %v, timer %v", ctx.Err(), ctx.(*callCtx).timer)
		}
		cancel()
		ctx, cancel = withDeadlineLazy(parent, time.Now().Add(time.Hour))
		cancel()
		<-ctx.Done()
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("err %v", ctx.Err())
		}
	})
	t.Run("AfterFunc and children", func(t *testing.T) {
		ctx, cancel := withDeadlineLazy(parent, time.Now().Add(20*time.Millisecond))
		defer cancel()
		ran := make(chan struct{})
		context.AfterFunc(ctx, func() { close(ran) })
		stopped := false
		stop := context.AfterFunc(ctx, func() { stopped = true })
		if !stop() || stop() {
			t.Fatal("stop before the end: want true, then false")
		}
		child, cancelChild := context.WithCancel(ctx)
		defer cancelChild()
		gone, cancelGone := context.WithCancel(ctx)
		cancelGone()
		<-gone.Done()
		select {
		case <-ran:
		case <-time.After(5 * time.Second):
			t.Fatal("an AfterFunc did not run at the deadline")
		}
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a child did not end with its parent")
		}
		if !errors.Is(child.Err(), context.DeadlineExceeded) || stopped || len(ctx.(*callCtx).after) != 0 {
			t.Fatalf("child err %v, stopped func ran %v, %d left registered", child.Err(), stopped, len(ctx.(*callCtx).after))
		}
		after := make(chan struct{})
		if context.AfterFunc(ctx, func() { close(after) })() {
			t.Fatal("stop of an AfterFunc registered after the end said it stopped it")
		}
		<-after
	})
}

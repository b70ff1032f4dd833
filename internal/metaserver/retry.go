package metaserver

import (
	"context"
	"time"
)

// dataCallWait bounds each call of a push to one data server: a batch of
// tombstones, a cut. A data server that takes connections and answers
// nothing (stopped, wedged; its kernel acknowledges what it is sent, so
// the connection does not fail) held a retrier's round for as long as it
// stayed so, and with it every push to the other data servers of later
// rounds. A call cut by it is tried again in a later round.
const dataCallWait = 10 * time.Second

// retrier runs rounds of a push to the data servers when poked, and again
// after a back-off while rounds fail: tombstones of deleted objects
// (gone.go) and pending dims cuts (cut.go) each have one. Idle, it waits
// only to be poked: no timer runs while there is nothing to retry.
type retrier struct {
	wake     chan struct{} // capacity 1
	min, max time.Duration
}

func newRetrier(lo, hi time.Duration) retrier {
	return retrier{wake: make(chan struct{}, 1), min: lo, max: hi}
}

// poke has the retrier run a round soon; it never waits.
func (r *retrier) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run calls round when poked, and when the back-off after a round that
// asked to be tried again ends, until ctx is done. The back-off doubles
// from min to max while rounds fail and starts over after one that does
// not.
func (r *retrier) run(ctx context.Context, round func(context.Context) (again bool)) {
	timer := time.NewTimer(r.max)
	timer.Stop()
	defer timer.Stop()
	wait := r.min
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-timer.C:
		}
		again := round(ctx)
		if ctx.Err() != nil {
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if !again {
			wait = r.min
			continue
		}
		timer.Reset(wait)
		wait = min(2*wait, r.max)
	}
}

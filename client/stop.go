package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/dtl"
)

// Stopped is what StopCluster did.
type Stopped struct {
	// Servers is how many servers stopped at its request.
	Servers int
	// Gone labels the servers that were already gone.
	Gone []string
	// Transient is how many transient containers were deleted, and
	// TransientErr why not all were (nil when they were).
	Transient    int
	TransientErr error
	// TransientLeft names the transient containers found and not
	// deleted, and TransientUnlisted labels the metadata servers whose
	// transient containers could not be listed (both empty when
	// TransientErr is nil): what a later delete has to remove.
	TransientLeft     []string
	TransientUnlisted []string
}

// StopCluster stops the whole cluster as `pdc down` does: it deletes the
// transient containers (best effort: a cluster with a dead server is still
// stopped, and the failure is in the result), asks every server to stop,
// waits until the processes of those on this machine have exited, and
// removes the server list from the cluster's tmpdir. A server already gone
// is counted in Stopped.Gone, not an error. The client is of no use for
// calls to servers afterwards; Close it.
func (c *Client) StopCluster(ctx context.Context) (Stopped, error) {
	var st Stopped
	tr := c.deleteTransient(ctx)
	st.Transient, st.TransientErr, st.TransientLeft, st.TransientUnlisted = tr.deleted, tr.err, tr.left, tr.unlisted
	host, _ := os.Hostname()
	servers := c.Servers()
	errs := make([]error, len(servers))
	gone := make([]bool, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			err := c.ShutdownServer(ctx, s.Rank)
			// A server that reports another host name (pdc up --hosts)
			// but listens on this machine is waited for all the same;
			// a server in this very process (a test) has no process to
			// wait for.
			local := (s.Host == host || dtl.SameHost(s.Addr)) && s.PID != os.Getpid()
			switch {
			case errors.Is(err, pdc.ErrUnavailable) && (!local || !cluster.Running(s.PID)):
				gone[i] = true
				return
			case err != nil:
				errs[i] = err
				return
			}
			if local {
				// Its connections are closed; wait for the process.
				if err := cluster.WaitExit(ctx, s.PID); err != nil {
					errs[i] = fmt.Errorf("%s: %w", s.Label(), err)
				}
			}
		})
	}
	wg.Wait()
	for i, g := range gone {
		if g {
			st.Gone = append(st.Gone, servers[i].Label())
		} else if errs[i] == nil {
			st.Servers++
		}
	}
	if err := errors.Join(errs...); err != nil {
		return st, fmt.Errorf("stop the servers in %s: %w", c.TmpDir(), err)
	}
	if err := cluster.RemoveFiles(c.TmpDir()); err != nil {
		return st, err
	}
	return st, nil
}

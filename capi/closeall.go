package capi

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/dtl"
)

// CloseAllServer is PDC_Client_close_all_server: it stops the cluster in
// $PDC_TMPDIR as `pdc down` does. Transient containers are deleted (best
// effort), every server is asked to stop, the call waits until the
// processes of those on this machine have exited, and the server list is
// removed. It opens a connection of its own, so it works with or without
// PDCinit; handles opened before stay valid to close, but every call that
// needs a server fails from then on. Servers already gone are not an
// error.
func (l *Lib) CloseAllServer() int {
	return l.run("PDC_Client_close_all_server()", l.closeAllServer)
}

func (l *Lib) closeAllServer() error {
	timeout, err := parseTimeout(l.cfg.Getenv(EnvTimeout))
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout(timeout)
	defer cancel()
	c, err := client.Connect(ctx, l.clientOptions()...)
	if err != nil {
		return err
	}
	defer c.Close()
	// Transient containers end with the cluster; a cluster with a dead
	// server is still stopped.
	if _, err := c.DeleteTransient(ctx); err != nil {
		l.report("PDC_Client_close_all_server()", fmt.Errorf("going on to stop the servers, but transient containers were not all deleted: %w", err))
	}
	host, _ := os.Hostname()
	servers := c.Servers()
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			err := c.ShutdownServer(ctx, s.Rank)
			switch {
			case errors.Is(err, pdc.ErrUnavailable):
				return // already gone
			case err != nil:
				errs[i] = err
				return
			}
			// A server in this very process (a test) has no process to
			// wait for; others on this machine are waited for.
			if (s.Host == host || dtl.SameHost(s.Addr)) && s.PID != os.Getpid() {
				if err := cluster.WaitExit(ctx, s.PID); err != nil {
					errs[i] = fmt.Errorf("%s: %w", s.Label(), err)
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop the servers in %s: %w", c.TmpDir(), err)
	}
	return cluster.RemoveFiles(c.TmpDir())
}

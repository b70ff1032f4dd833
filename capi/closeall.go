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
// error; any other failure, of the transient containers' deletion too, is
// the call's, reported in its one line.
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
	// Transient containers end with the cluster (best effort, as pdc
	// down). A server already gone is not an error here either; another
	// failure fails the call, in its one line, once the servers are
	// stopped all the same.
	var errs []error
	if _, err := c.DeleteTransient(ctx); err != nil && !errors.Is(err, pdc.ErrUnavailable) {
		errs = append(errs, fmt.Errorf("transient containers were not all deleted: %w", err))
	}
	host, _ := os.Hostname()
	servers := c.Servers()
	stopErrs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			err := c.ShutdownServer(ctx, s.Rank)
			switch {
			case errors.Is(err, pdc.ErrUnavailable):
				return // already gone
			case err != nil:
				stopErrs[i] = err
				return
			}
			// A server in this very process (a test) has no process to
			// wait for; others on this machine are waited for.
			if (s.Host == host || dtl.SameHost(s.Addr)) && s.PID != os.Getpid() {
				if err := cluster.WaitExit(ctx, s.PID); err != nil {
					stopErrs[i] = fmt.Errorf("%s: %w", s.Label(), err)
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(stopErrs...); err != nil {
		errs = append(errs, fmt.Errorf("stop the servers in %s: %w", c.TmpDir(), err))
	} else if err := cluster.RemoveFiles(c.TmpDir()); err != nil {
		errs = append(errs, err)
	}
	// One error, so one line: report joins its parts with "; ".
	return errors.Join(errs...)
}

package capi

import (
	"errors"
	"fmt"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
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
	st, err := c.StopCluster(ctx)
	var errs []error
	if st.TransientErr != nil && !errors.Is(st.TransientErr, pdc.ErrUnavailable) {
		errs = append(errs, fmt.Errorf("transient containers were not all deleted: %w", st.TransientErr))
	}
	// One error, so one line: report joins its parts with "; ".
	return errors.Join(append(errs, err)...)
}

// Package client is the Go API of pdc. Connect reads the server list that
// the servers wrote in the tmpdir and returns a Client that dials each
// server lazily, on first use, keeping a small pool of connections to each.
//
//	c, err := client.Connect(ctx)               // $PDC_TMPDIR or ./pdc_tmp
//	defer c.Close()
//	rtt, err := c.Ping(ctx, 0)
//	sts, err := c.Status(ctx)
//
// Every method that talks to a server takes a context and returns within
// its deadline: a server that is gone is pdc.ErrUnavailable, one that does
// not answer in time pdc.ErrTimeout. Errors from servers unwrap to pdc's
// sentinel errors. A Client is safe for concurrent use.
package client

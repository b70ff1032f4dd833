// Package dataserver is a data server's side of region transfers. A client
// registers transfers (DataStart) and gets their ids at once; the bytes of
// writes come with the request and are stored in the background by a fixed
// set of workers fed from a bounded queue, reads are done the same way into
// buffers held until the client collects them. A client waits on the server
// (DataWait): the answer goes out when the transfers are done, with the read
// bytes as its payload, so no client polls. Memory is bounded: a transfer
// that would pass the budget of bytes in flight waits for room, which slows
// the client that sent it instead of growing the server.
//
// Ordering: a read waits for the writes of the same client to the same
// object that were registered before it and overlap it, so that start_all's
// writes-then-reads sees its own writes. Between clients, a read sees a
// write once that write has been waited.
package dataserver

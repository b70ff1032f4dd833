// Package server is the composition root of a `pdc server` process: it turns
// a Config into a listener, an RPC server with the cluster methods (ping,
// status, register, shutdown), and the rendezvous with the other servers
// through the tmpdir, and runs until it is told to stop.
//
// Rendezvous: rank 0 publishes its address in the tmpdir (cluster.Rank0File);
// every other rank waits for that record, then registers with rank 0 over
// RPC, and rank 0 answers all of them once the last has registered (a
// server-side wait, no polling). Rank 0 then writes the server list, which
// is therefore complete whenever it exists.
package server

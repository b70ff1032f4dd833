// Package bed is a multi-host test bed on one Linux machine: N nodes, each
// a network namespace with its own IPv4 address on a private /24, joined
// by veth pairs to one bridge in the host namespace, each with its own
// host name (UTS namespace), node-local directories, and one directory
// all nodes see, standing in for the shared file system of a cluster.
//
// Tests and benchmarks use it to run pdc servers and clients as they run
// on a cluster: on different hosts, over a real network, with faults a
// loopback cannot have. A node's link can be taken down (a partition)
// and brought back, two nodes cut from each other only, its bandwidth
// limited with tc's tbf (no netem
// needed), and a Proxy adds latency, jitter and connection resets
// between a client and a server.
//
// It needs root, iproute2 (ip, tc) and util-linux's unshare; Available
// says why not when they are missing. Every name a bed creates carries
// the creating process's PID, so New removes what a killed test process
// left behind, and Close removes the rest (docs/design/0019).
package bed

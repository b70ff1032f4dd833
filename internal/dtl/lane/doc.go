// Package lane is the shared-memory transport of region payloads between a
// client and a data server on one host (ARCHITECTURE.md decision 3, the DTL's shm
// mode for region I/O).
//
// A lane is a memory file that the data server makes, sizes and seals
// (it can neither shrink nor grow, so a mapping never faults past its
// end), maps, and hands to the client over a Unix socket (SCM_RIGHTS).
// Both map it read-write. The client owns the space: an Arena hands out
// spans, the client copies a write's bytes into its span and names the
// span in the request; the server stores them from there, and copies a
// read's bytes into the span the wait names. Bytes cross memory twice (in
// and out of the lane) instead of going through a socket's buffers.
package lane

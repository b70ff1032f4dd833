// Package batch sends many small requests to metadata servers as few large
// ones: items are grouped by the server that owns them, cut into chunks
// bounded by count and bytes, and the servers are asked concurrently. The
// client's object, tag and membership batches and the transfer engine's
// placements share it.
//
// The bounds are the client's side of the protocol limits
// (internal/limits): at most MaxItems items and, past the first, MaxBytes
// bytes of items per request, so that a request and its answer fit the
// 1 MiB header a peer accepts.
package batch

// Package dtlpeer is a sender process for the transport's conformance
// suite and benchmarks: an RPC server with a dtl.Sender whose payloads are
// synthetic and checkable (a deterministic pattern of any size), plus keys
// that misbehave on purpose (one that never answers).
package dtlpeer

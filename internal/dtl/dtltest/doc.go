// Package dtltest is the transport's conformance suite: Run puts one mode
// through every size, sink and failure a transport must handle, against
// sender processes of its own (dtlpeer, started from the test binary by
// StartPeer; the test's TestMain must call PeerMain first).
package dtltest

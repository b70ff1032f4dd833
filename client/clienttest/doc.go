// Package clienttest runs a pdc cluster inside a test's own process, for
// tests of code that uses package client, as net/http/httptest does for
// HTTP: Start brings up real servers (metadata and data roles, real
// stores in the test's temporary directory, real sockets on 127.0.0.1),
// and the test's cleanup stops them and fails the test if one of them
// failed.
//
// The servers run as goroutines of the test process, so they are cheap to
// start and see the race detector; tests of what crosses processes (a
// server killed with SIGKILL, a client process that exits mid-transfer)
// start `pdc server` processes instead.
package clienttest

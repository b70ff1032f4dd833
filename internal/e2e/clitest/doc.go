// Package clitest is what the end-to-end tests of the pdc command line
// share, beyond internal/e2e's clusters and processes: the client roles a
// test binary re-run as a client process plays (Role, which the TestMain
// of every package whose tests run client processes hands to e2e.Main),
// the naive model of an object's region data the region tests check reads
// against, and restarting one server of a running cluster. The tests
// themselves are in packages by area: internal/e2e/commands, access,
// durable, deletes, region and bench. Only tests import it.
package clitest

//go:build !race

package e2e

// Race reports whether the tests, and so the client processes they re-run
// as and the servers of MainRace packages, were built with the race
// detector.
const Race = false

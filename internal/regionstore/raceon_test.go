//go:build race

package regionstore

// raceEnabled: the race detector slows the tests that replay long runs
// tenfold, so they take fewer seeds.
const raceEnabled = true

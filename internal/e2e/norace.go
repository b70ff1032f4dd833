//go:build !race

package e2e

// Race reports whether the tests, and so the pdc binary they run, were
// built with the race detector.
const Race = false

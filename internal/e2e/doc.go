// Package e2e is what the end-to-end tests share: the pdc binary under test
// (built once per test binary; under -race, race-built for the servers of
// the packages that use MainRace and plain otherwise: see Main and Run),
// clusters of real pdc server processes in fresh directories that are
// stopped when a test ends, and test binaries re-run as client processes
// in a role. Only tests import it.
package e2e

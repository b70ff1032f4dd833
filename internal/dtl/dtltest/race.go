//go:build race

package dtltest

// raceEnabled: under the race detector every byte costs several times its
// size in shadow memory, so the 5 GiB case does not fit a 24 GiB machine.
const raceEnabled = true

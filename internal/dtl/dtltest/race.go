//go:build race

package dtltest

// raceEnabled: under the race detector every byte costs several times its
// size in shadow memory, so the 5 GiB case does not fit a 24 GiB machine.
const raceEnabled = true

// bigPayload is the suite's large payload: under the race detector 20 MiB,
// still above the 16 MiB from which shm copies in parallel parts and many
// chunks long, at a third of the cost of 64 MiB.
const bigPayload = 20 << 20

//go:build !race

package dtltest

const raceEnabled = false

// bigPayload is the suite's large payload (smaller under -race).
const bigPayload = 64 << 20

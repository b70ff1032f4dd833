//go:build !race

package dtltest

const raceEnabled = false

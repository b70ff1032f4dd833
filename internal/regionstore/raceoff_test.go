//go:build !race

package regionstore

const raceEnabled = false

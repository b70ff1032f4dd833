//go:build race

package rpc

// raceEnabled: the race detector allocates on its own account.
const raceEnabled = true

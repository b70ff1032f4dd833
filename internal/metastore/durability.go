package metastore

import (
	"fmt"

	"github.com/pdcgo/pdc"
)

// Durability says when a change is acknowledged.
type Durability int

const (
	// DurabilityProcess acknowledges once the change is in the kernel: it
	// survives a crash of the server process, not of the machine.
	DurabilityProcess Durability = iota
	// DurabilitySync acknowledges once the change is fsynced.
	DurabilitySync
)

// ParseDurability parses "process" (also "close", the default) or "sync".
func ParseDurability(s string) (Durability, error) {
	switch s {
	case "", "process", "close", "default":
		return DurabilityProcess, nil
	case "sync", "fsync":
		return DurabilitySync, nil
	}
	return 0, fmt.Errorf("unknown durability %q (want process or sync): %w", s, pdc.ErrInvalid)
}

func (d Durability) String() string {
	if d == DurabilitySync {
		return "sync"
	}
	return "process"
}

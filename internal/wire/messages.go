package wire

import "fmt"

// The message types and their codecs are generated from messages.wire
// (messages_gen.go); what they need besides is here.

// Role bits say what a server does.
type Role uint32

const (
	RoleMetadata Role = 1 << 0
	RoleData     Role = 1 << 1
	RoleBoth          = RoleMetadata | RoleData
)

// check refuses a batch whose keys and values do not pair up.
func (m *KVBatch) check(f *fields) {
	if len(m.Keys) != len(m.Values) {
		f.fail(fmt.Errorf("%d keys but %d values", len(m.Keys), len(m.Values)))
	}
}

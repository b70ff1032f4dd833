// Metadata messages: generated from messages.wire; their constants.

package wire

// MembersVersion is the Members version this build speaks. A metadata
// server refuses a request of another version with pdc.ErrVersion.
const MembersVersion = 1

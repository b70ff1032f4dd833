// Staged files' records (docs/design/0008): the messages are generated
// from messages.wire.

package wire

// StageVersion is the version of the staging requests (StageBatch,
// StageKey, StageListReq, StageRemoveReq) this build speaks: 2 added
// namespaces. A request of version 0 comes from a client before them and
// is served in the default namespace; a server refuses any other version
// with pdc.ErrVersion.
const StageVersion = 2

// Paged listing and deleting of containers (docs/design/0017): the
// messages are generated from messages.wire.

package wire

// PageVersion is the version of ObjPageReq, ObjPage, ContPageReq,
// ContPage, ObjPurge and ObjIDs this build speaks. A server refuses a
// request of another version with pdc.ErrVersion.
const PageVersion = 1

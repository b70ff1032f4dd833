// Package limits says what pdc accepts as names, dims, storage modes and tag
// values. Metadata servers check every create, set-dims and tag put with
// it, so that a buggy or hostile client cannot store what later calls (a
// put, a get, `pdc obj ls`) would fail on; the Go client, the CLI and the C
// API check the same things first, so that a mistake fails before any
// request, with the same message.
//
// Names that things are created under (objects, containers, tag keys, app
// names) must be valid UTF-8 without control characters: they are printed
// one per line and in columns. Names used to find things (open, get, delete)
// are only checked for what the store cannot hold (Lookup), so that an
// object stored before these rules can still be opened and deleted.
package limits

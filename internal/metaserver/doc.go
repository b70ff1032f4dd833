// Package metaserver is the metadata half of a pdc server: containers,
// objects with their properties and dims, and key/value tags, kept durably
// in an embedded pebble store, one per server.
//
// Durability: every acknowledged change is in the store's write-ahead log in
// the kernel before the reply goes out, so it survives kill -9 of the
// server; with Durability "sync" it is also fsynced, with concurrent writers
// sharing fsyncs (group commit), so it survives power loss. See
// docs/design/0004-metadata-store.md.
//
// Keys (one byte of kind first):
//
//	'C' name                      container record (wire.ContainerMeta)
//	'c' id                        container name, by id
//	'O' name 0 ts uid app         object record (wire.ObjectMeta)
//	'o' id                        object identity (the 'O' key suffix), by id
//	'M' container-id object-id    membership
//	'T' kind id tag-name          tag value (wire.TagValue)
//	'S'                           id sequence high-water mark
//	'V'                           store format version
//	'X' tree term ...             DART tag index entries (tagindex/entries.go)
//	'Q' seq obj                   outbox: index updates for other servers (wire.IndexOps)
//	'D'                           how the index was built: version, flags
package metaserver

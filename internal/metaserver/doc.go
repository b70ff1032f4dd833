// Package metaserver is the metadata half of a pdc server: containers,
// objects with their properties and dims, and key/value tags, kept durably
// in the server's store (internal/metastore: pebble with a log in front),
// one per server. This package holds the handlers, the key layout below
// and migration; index changes for other servers go through
// internal/outbox.
//
// Durability: every acknowledged change is in the store's write-ahead log in
// the kernel before the reply goes out, so it survives kill -9 of the
// server; with Durability "sync" it is also fsynced, with concurrent writers
// sharing fsyncs (group commit), so it survives power loss. See
// docs/design/0004-metadata-store.md.
//
// Keys (one byte of kind first). The keys of an object ('O', 'o', its 'M'
// and 'm' keys, its 'T' keys) are held by the object's metadata server, and
// migrate.go moves them together:
//
//	'C' name                      container record (wire.ContainerMeta)
//	'c' id                        container name, by id
//	'O' name 0 ts uid app         object record (wire.ObjectMeta)
//	'o' id                        object identity (the 'O' key suffix), by id
//	'M' container-id object-id    membership: the object's home container (the
//	                              one it was created in) or one it was added to
//	'm' object-id container-id    added membership (the 'M' key of a container
//	                              the object was added to, reversed)
//	'T' kind id tag-name          tag value (wire.TagValue)
//	'S'                           id sequence high-water mark
//	'V'                           store format version
//	'Y' seq                       tag index: a batch of entry changes not yet in a run on disk
//	'Z' id block                  tag index: a run of entries on disk (internal/postings)
//	'X' tree term ...             index format 1 only: one DART entry each (tagindex/entries.go);
//	                              such a store is reindexed at start
//	'Q' seq obj                   outbox: index updates for other servers (wire.IndexOps;
//	                              obj is 0 for a record of one commit, of several objects)
//	'q' seq dest                  outbox: server dest (an index among the count in the
//	                              value) applied its whole part of record seq
//	'D'                           how the index was built: version, flags
//	'R' object-id seq             region map of a region-dynamic or region-local
//	                              object: where a written region went (regions.go)
//	'L' rank                      bytes this server has placed on data server rank
//	'F' path                      staged file record (wire.StageRecord, stage.go), default namespace
//	'f' namespace 0 path          staged file record of a named namespace (store version 2)
//	'G' object-id                 tombstone: a deleted object's data is still to go
//	                              from some data server (gone.go)
//	'K' object-id                 pending dims cut: a shrink or relayout some data
//	                              server may not have applied (cut.go)
//
// Containers and membership: an object is a member of its home container
// and of any container it was added to by reference (MethodObjMembers,
// PDCcont_put_objids). Listing a container scans its 'M' keys on every
// server. Deleting an object deletes its 'M' keys and 'm' keys; deleting a
// container deletes the objects whose home it is and only the memberships
// of the others, which keep living in their homes. Removing an object from
// its home container is refused: delete the object instead.
package metaserver

// Package metastore is the storage engine of a metadata server: an
// embedded pebble database with the server's own log in front of it.
//
// Durability: every acknowledged change is in the log in the kernel before
// the commit returns, so it survives kill -9 of the server; with
// DurabilitySync it is also fsynced, with concurrent writers sharing
// fsyncs (group commit), so it survives power loss. See
// docs/design/0004-metadata-store.md and 0021-metastore-outbox.md.
package metastore

// Package outbox delivers a metadata server's tag index changes to the
// servers that hold their entries: in the order they were committed, once
// each, surviving crashes and restarts, until every destination has
// applied its part.
//
// A record is written by the caller in the same commit as the tag change
// it indexes, under RecordKey(r.Seq(), 0) (Add or AddSplit takes the
// sequence number first; Release makes it deliverable once the commit is
// durable, Drop forgets it if the commit failed). One goroutine per
// destination delivers that destination's parts in sequence order through
// Peers; once a destination has applied its whole part of a record that
// others have not, a mark (MarkKey) records it in the batch that records
// the acknowledgement, so a restart never sends that part again: the
// destination may since have applied newer records changing the same
// entries, and applying the old part after them would bring back entries
// they deleted. A record is deleted, with its marks, once every
// destination has applied its part. Deliveries to one destination go one
// at a time, and each is marked in the batch that marks every earlier
// one to that destination not marked yet, never after a newer one. So a
// crash between an acknowledgement and its mark sends that part again
// only with every newer part to that destination, in order: while the
// store cannot record (a full disk), later parts are sent meanwhile, and
// marked together once it can.
//
// This server's own part of a record (only a record loaded at Start has
// one: tag writes change the server's own entries directly) is applied by
// Start, through Log.ApplyOwn, before the server serves.
//
// The outbox keeps its records and marks through Log, the server's store,
// and reaches the servers through Peers; both are small interfaces, so
// the package is tested on its own with an in-memory store and peers.
//
// Writers are acknowledged without waiting for delivery while the backlog
// (bytes committed and not yet tried at their destinations) is under a
// bound; over it (Overloaded), a writer waits for its own records
// (WaitTried). A query first fences (Fence): it returns once every record
// committed before it has been tried everywhere.
package outbox

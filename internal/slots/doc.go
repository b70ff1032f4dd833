// Package slots keeps region data where its placement says when a cluster
// restarts with another number of data servers.
//
// Data lives in slots. A slot is the index of the data server a piece of
// data was written to, in the cluster of that time (for region static the
// block's index mod the servers at create; for object static the object's
// home; for region dynamic and local the slot the metadata server chose).
// It is fixed when the data is written and recorded with it, so that no
// restart changes which slot a piece is in; only which server holds the
// slot changes: placement.SlotHost. Each slot is one directory,
// data-<slot>, under a server's data dir, holding the region store files
// of that slot's objects.
//
// At start every server reports the slot dirs its data dir holds, each
// with its generation (the epoch of the last start that held it, in a
// SLOT file inside), and rank 0 plans (Plan): a slot whose newest copy is
// under its holder's data dir is held in place (the usual case with one
// shared data dir, as pdc up makes); one under another data dir is sent
// to its holder by a server that sees it, file by file over RPC, each file
// checked by CRC-32C on arrival, and made the holder's by one rename once
// all are there (SlotCommit); only then does the sender remove its copy.
// Copies older than the newest, or the same as the one used, are moved
// aside, never removed. Once every server holds its slots, each slot's
// SLOT file gets the new epoch and rank 0 records every slot's generation
// in its slot table (data-slots in its data dir).
//
// A slot the table knows but whose newest copy no server finds (a data
// dir on a node not started now, or only older copies) is missing: the
// server that should hold it refuses every request in it with an error
// that names the slot and why, and it is never created empty. A start
// killed at any point leaves every slot's newest copy intact somewhere,
// plus perhaps a partial copy (.incoming, removed at the next start) or a
// second complete one (set aside at the next start); the next start, with
// any number of servers, plans again from what it finds.
//
// A dims cut pushed while a slot is missing is kept for it by its holder,
// in its data dir (Ledger, data-<slot>.cuts), and acknowledged; the start
// that finds the slot again applies the cuts it has not had (Due) before
// it serves, those other data dirs keep sent to it with the start's
// rounds; the plan holds it only once every data dir that may keep some
// is here (owed.go).
//
// Metadata stores are not slots, but their fate at start is decided here
// too: Adopt gives each store no metadata server opens to one that sees
// it, and CheckStores refuses a start that does not find a store the
// cluster has (its record, metadata-stores, in every data dir), unless
// the operator abandons it (stores.go).
package slots

// Package postings keeps the DART index entries of one metadata server: an
// ordered set of small keys, written far more often than read, in the
// server's pebble store but not one pebble key per entry.
//
// A tag writes 5 to 30 entries. As pebble keys each cost a skiplist insert
// at commit, then its share of every flush and compaction, about a
// microsecond in all: several times the tag's own write. Here a batch of
// changes (Ops) is one log record in pebble (one key however many entries
// it holds) and, in memory, one sorted run. Small runs of a level are
// merged once a level holds Fanout of them. When the runs in memory reach
// FlushBytes, the store's goroutine merges them into a run on disk, stored
// as blocks under one key each, in the batch that deletes the log records
// it holds, and merges runs on disk by level the same way. A read merges
// every run, the newest entry of a key winning, deletions hiding what is
// older. Changes become visible in the order of their log records: Stage
// holds the log until Publish or Abandon.
//
// Keys in the store (one prefix byte each, chosen by the caller):
//
//	log seq(8)                 a batch of changes not yet in a run on disk
//	run id(8) block(4)         a block of a run on disk: version, records
//	run id(8) 0xffffffff       the run's description (runMeta)
//
// A crash loses nothing committed: the log records are replayed at Open,
// and a run on disk exists from the batch that writes its description and
// deletes what it replaces, so blocks written before a crash without it
// are dropped at Open.
package postings

// Package regionstore keeps a data server's share of objects on disk, by
// file offset (the canonical row-major layout, %016x.off) or by region (an
// append log of written regions, %016x.reg, with an index checkpoint,
// %016x.idx). A read is resolved against the regions stored
// so far by overlay.Resolve: the last completed write wins for every element, and
// elements never written read as zeros.
//
// Durability: a Write is in its file (pwritten, in the kernel) when it
// returns, so it survives the process being killed; with Options.Sync it
// is fsynced too. Flush and Close fsync. Files are created, relaid out
// and checkpointed by writing a temporary file and renaming it. A file
// whose fsync failed is never fsynced again (the kernel may have given
// up on its dirty pages and would report a second fsync good): the next
// flush rewrites it from what its CRCs vouch for (unsynced.go), and
// until that succeeds every durable step of the object fails with
// ErrUnsynced, also after the store is opened again.
//
// Integrity: every file starts with a magic and a version, and stored
// bytes carry CRC-32 checksums per 4 KiB block (CRC-32C in files of
// version 1, which are still read and written). A block that fails its
// checksum reads as an error wrapping pdc.ErrCorrupt. A write cut by a
// crash (kill -9) leaves each block it touched with its old bytes or its
// new ones, never one that fails its checksum: blocks are pages, and a
// write names its blocks' new checksums in the file's pending slot
// before it changes them (pending.go). By-region logs made before
// version 3 have no slot and take every write as an append.
//
// Dims: the store learns an object's dims from each call. Elements inside
// both the old and the new dims keep their values; elements outside the
// new dims are dropped, so they read as zeros if the dims grow back. A
// shrink that no call carries drops nothing by itself: the metadata server
// pushes it (Cut) before any newer dims can come.
//
// The formats are described in offset.go and logfile.go.
package regionstore

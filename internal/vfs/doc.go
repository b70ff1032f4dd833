// Package vfs is the one seam between pdc's stores and the file system:
// the metadata store (its log, and pebble through an adapter), the region
// store, staging records and the cluster files do all their file I/O
// through an FS, so that tests can make any of it fail or "crash".
//
// Three implementations:
//
//   - Default, the operating system's files;
//   - NewMem, files in memory that can crash: CrashClone keeps only what
//     was synced (file contents by File.Sync, names by FS.SyncDir), as
//     after a power loss, and Clone keeps everything written, as after
//     kill -9 of the process;
//   - NewFaulty, a wrapper that fails chosen operations on chosen paths
//     (ENOSPC, EIO, short writes, after N operations or once writes would
//     use more than N bytes of space), and calls a hook before every
//     operation so that a test can take a crash snapshot at any point.
//
// Operations a file system may not have are optional: Mapper (mmap) and
// DataSeeker (SEEK_DATA). Their methods return an error wrapping
// errors.ErrUnsupported where the file cannot, and callers fall back to
// reads and writes.
//
// Errors are the os package's (*fs.PathError, *os.LinkError) around the
// system's errno, so errors.Is(err, fs.ErrNotExist) and errors.Is(err,
// syscall.ENOSPC) hold for every implementation; servers map a full disk
// and EIO to pdc.ErrNoSpace and pdc.ErrIO once, at the wire.
//
// See docs/design/0014-file-system-seam.md.
package vfs

// Package staging holds the parts of producer/consumer staging (DYAD's
// data management around its transport layer) that are not the metadata
// records themselves, which the metadata servers keep:
//
//   - managed directories: resolving a path given by a user to its clean
//     relative form and its place in a producer or consumer dir, refusing
//     anything that leaves the dir lexically or through a symlink;
//   - file locks that wait under a context;
//   - checksums (CRC-32C) of whole files;
//   - the owner's side: a resolver that serves produced files from a
//     server's producer dir to the data transport layer, under a shared
//     lock and only while the file is still what was produced;
//   - the consumer's side: the record of which version a local copy holds,
//     so that a copy already current is not moved again.
package staging

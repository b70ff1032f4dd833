// Package overlay resolves a read of a region against the regions written
// so far, each with the order in which its write completed: every element
// comes from the newest write that holds it, and elements no write holds
// are holes. It is pure (no I/O, no clock) so that the data servers'
// region store and the metadata servers' region maps, which must agree on
// what a read returns, share one implementation without importing each
// other.
package overlay

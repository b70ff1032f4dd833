// Package tagindex is the pure core of kvtag search: the query language,
// matching a query against a tag, the DART partition of terms onto metadata
// servers, the layout of index entries, and the plan that decides which
// servers a query asks. It does no I/O and takes no clock; the metadata
// servers store what it lays out and the client runs the plans it makes.
//
// # Queries
//
// A query is KEY or KEY=VALUE. KEY and a string VALUE are each a literal
// (exact), lit* (prefix), *lit (suffix) or *lit* (infix); a lone * is any.
// A VALUE that reads as a number also matches numeric tags equal to it, and
// LO..HI (either end may be left out) matches numeric tags in the closed
// range. Numeric tags never match string patterns: numbers match exactly,
// as in PDC. See Parse for the errors.
//
// # The index (DART)
//
// Every object tag puts entries under four trees, each entry stored on the
// metadata server that owns its term (Partition):
//
//	K  key   -> value, object id   exact key; values sorted, numbers by value
//	S  every suffix of a key -> key        (only the key itself without
//	                                         suffix-tree mode)
//	R  reversed key -> key                  suffix queries on keys
//	V, W, U                                 the same three for string values
//
// Exact and prefix queries go straight to the server(s) of their literal;
// suffix queries look up the reversed literal, infix queries the suffix
// tree, and then ask the servers of the keys or values found. See
// docs/design/0007-search-dart.md.
package tagindex

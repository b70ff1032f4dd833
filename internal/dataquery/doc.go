// Package dataquery is the pure core of value queries over object data:
// a predicate (comparison leaves combined with AND and OR, in postfix
// order as wire.DataQuery carries it) compiled for one element type, and
// evaluated over buffers of elements. It does no I/O.
//
// Elements are compared in the object's own type: a leaf's value is
// converted to the element type once, when the client builds the request
// (Encode), so that int64 and uint64 keep every bit and float32 compares
// as float32. NaN matches no comparison.
package dataquery

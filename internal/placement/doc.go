// Package placement decides where things live, as pure functions of their
// names and the cluster's shape: which metadata server owns an object or a
// container, and how ids carry that owner. It does no I/O.
//
// An object's placement key is uint32(FNV-1a(name) + time step); its owner
// is key mod M, M being the number of metadata servers. Ids are key<<32 |
// sequence, so any client finds the owner of an id without asking, and when
// a cluster restarts with a different M every id still names its owner:
// key mod M' for the new M'.
//
// Data lives in slots: a slot is the index of the data server a piece of
// data was written to, in the cluster of that time, and never changes.
// SlotHost says which data server of the cluster now holds a slot.
package placement

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
//
// Which slots an object's data goes to is its partition strategy's:
// object static puts it all in one slot and region static cuts it in
// blocks of rows dealt round-robin over the slots (NewSpread fixes both
// at create, StaticPieces cuts a region by them); region dynamic and
// region local leave each write to its metadata server, which puts it on
// the least loaded of the client's Candidates (LeastLoaded). The client
// and the metadata server both call these, so that they cannot disagree.
package placement

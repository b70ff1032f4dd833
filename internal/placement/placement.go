package placement

import "hash/fnv"

// Key is an object's or container's placement key.
func Key(name string, timeStep uint32) uint32 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return h.Sum32() + timeStep
}

// Owner is the index, among m metadata servers, of the owner of key.
func Owner(key uint32, m int) int {
	if m <= 0 {
		return 0
	}
	return int(key % uint32(m))
}

// ID makes an id from a placement key and a sequence number unique among
// the ids of that key. Sequence 0 is never used, so no id is 0.
func ID(key, seq uint32) uint64 { return uint64(key)<<32 | uint64(seq) }

// KeyOf returns the placement key an id carries.
func KeyOf(id uint64) uint32 { return uint32(id >> 32) }

// SeqOf returns the sequence number of an id.
func SeqOf(id uint64) uint32 { return uint32(id) }

// OwnerOfID is the index, among m metadata servers, of the owner of id.
func OwnerOfID(id uint64, m int) int { return Owner(KeyOf(id), m) }

// SlotHost is the index, among n data servers, of the server that holds
// data slot slot. A slot is where a piece of an object's data lives,
// fixed when it is written: the index of the data server it was written
// to, in the cluster of that time. Slot i of a cluster of n data servers
// is server i's own; a cluster restarted with fewer servers holds slot i
// on server i mod n, and one restarted with more holds every slot on the
// server whose own it is (see docs/design/0013-data-slots.md).
func SlotHost(slot, n int) int {
	if n <= 0 || slot < 0 {
		return 0
	}
	return slot % n
}

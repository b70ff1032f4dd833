package metaserver

import "sync"

// freshSet remembers the objects this process created that have had no
// object tag since: a tag put on one has no old value to read, and
// reading it costs a search of the memtable per object, about as much as
// the put itself. Objects are known by their sequence number, from the
// first one this process handed out (base): an object of this server with
// a higher one was created by this process, as imports happen only while
// the cluster starts and move the counter above the sequence numbers they
// bring. The set forgets everything on restart, which only costs reads.
type freshSet struct {
	mu   sync.Mutex
	used bool
	base uint32
	bits []uint64 // bit i: sequence number base+i
}

// maxFresh bounds the sequence numbers the set covers (8 MiB of bits);
// objects beyond it are read as any other.
const maxFresh = 1 << 26

// add marks n objects from sequence number seq as created without tags.
// Call it before their creation commits: a tag put that finds one cannot
// run before the object exists, and it clears the mark in the same step
// as it decides not to read.
func (f *freshSet) add(seq uint32, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.used {
		f.used, f.base = true, seq
	}
	if seq < f.base {
		return
	}
	lo, hi := uint64(seq-f.base), uint64(seq-f.base)+uint64(n)
	if hi > maxFresh {
		return
	}
	for uint64(len(f.bits))*64 < hi {
		f.bits = append(f.bits, 0)
	}
	for i := lo; i < hi; i++ {
		f.bits[i/64] |= 1 << (i % 64)
	}
}

// take reports whether the object with sequence number seq is marked, and
// clears the mark: the caller is about to give it a tag.
func (f *freshSet) take(seq uint32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.used || seq < f.base {
		return false
	}
	i := uint64(seq - f.base)
	if i/64 >= uint64(len(f.bits)) {
		return false
	}
	w, bit := &f.bits[i/64], uint64(1)<<(i%64)
	marked := *w&bit != 0
	*w &^= bit
	return marked
}

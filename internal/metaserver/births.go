package metaserver

import (
	"sync"

	"github.com/pdcgo/pdc/internal/metastore"
)

// births tells the ids of objects not created yet from those of deleted
// ones. Ids are predictable (placement key and a sequence number), so a
// data server may be asked to write to one before its object exists; told
// "gone", it would refuse the object for as long as it runs, and the
// object, once created, could not be written there
// (docs/design/0016-deleted-objects.md, "Ids not yet created").
//
// An object of this server that is not in the store was never created if
// its sequence number is at or above the store's high-water mark (not
// handed out yet) or belongs to a batch of creates whose commit has not
// returned. Sequence numbers are taken and recorded under mu, so that
// unborn never sees one handed out and not yet recorded.
type births struct {
	mu struct {
		sync.Mutex
		// under counts the create batches under way by their first
		// sequence number and length.
		under map[uint32]int
	}
}

// begin hands out n consecutive sequence numbers for a batch of creates
// and records it as under way until end(first).
func (b *births) begin(st *metastore.Store, n int) (first uint32, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	first, err = st.NextSeqs(n)
	if err != nil {
		return 0, err
	}
	if b.mu.under == nil {
		b.mu.under = map[uint32]int{}
	}
	b.mu.under[first] = n
	return first, nil
}

// end records that the commit of the batch begun at first has returned,
// whether or not it succeeded.
func (b *births) end(first uint32) {
	b.mu.Lock()
	delete(b.mu.under, first)
	b.mu.Unlock()
}

// unborn reports whether no object with sequence number seq has been
// committed yet: seq is not handed out, or its create is under way. Ask
// it before looking in the store: an object not found there after unborn
// said so was not created before the look (or was created and deleted
// since, which a later question tells).
func (b *births) unborn(st *metastore.Store, seq uint32) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if uint64(seq) >= st.HighWater() {
		return true
	}
	for first, n := range b.mu.under {
		if seq >= first && uint64(seq) < uint64(first)+uint64(n) {
			return true
		}
	}
	return false
}

package dataserver

// idTable holds the registered transfers by id. Ids are handed out in
// order, and a request's transfers take consecutive ones, so the table is
// pages of idPageSize consecutive ids: registering or taking one is an
// array store in the page the previous call used, where a map from id to
// transfer probed a table of every transfer under way for each (with
// 65536 regions of 4 KiB started at once, 10% of the data server's CPU).
// Not safe for concurrent use: Service.mu guards it.
type idTable struct {
	pages map[uint64]*idPage
	n     int

	// last is the page the previous call used, at lastKey; spare is an
	// empty page kept for the next, so that a program moving one region
	// at a time (a transfer registered, then taken, then the next) does
	// not allocate a page for each.
	last    *idPage
	lastKey uint64
	spare   *idPage
}

const (
	idPageShift = 8
	idPageSize  = 1 << idPageShift
)

type idPage struct {
	ts   [idPageSize]*transfer
	live int
}

func newIDTable() idTable { return idTable{pages: map[uint64]*idPage{}} }

// page returns the page of id, made if create is set; nil if there is none.
func (tb *idTable) page(id uint64, create bool) *idPage {
	key := id >> idPageShift
	if tb.last != nil && tb.lastKey == key {
		return tb.last
	}
	p := tb.pages[key]
	if p == nil {
		if !create {
			return nil
		}
		if p = tb.spare; p != nil {
			tb.spare = nil
		} else {
			p = new(idPage)
		}
		tb.pages[key] = p
	}
	tb.last, tb.lastKey = p, key
	return p
}

// put registers t under id, which must not be registered.
func (tb *idTable) put(id uint64, t *transfer) {
	p := tb.page(id, true)
	slot := &p.ts[id&(idPageSize-1)]
	if *slot == nil {
		p.live++
		tb.n++
	}
	*slot = t
}

// get is the transfer registered under id, or nil.
func (tb *idTable) get(id uint64) *transfer {
	p := tb.page(id, false)
	if p == nil {
		return nil
	}
	return p.ts[id&(idPageSize-1)]
}

// del forgets id, if it is registered.
func (tb *idTable) del(id uint64) {
	key := id >> idPageShift
	p := tb.page(id, false)
	if p == nil {
		return
	}
	slot := &p.ts[id&(idPageSize-1)]
	if *slot == nil {
		return
	}
	*slot = nil
	p.live--
	tb.n--
	if p.live == 0 {
		delete(tb.pages, key)
		if tb.last == p {
			tb.last = nil
		}
		tb.spare = p // all its slots are nil again
	}
}

// len is how many transfers are registered.
func (tb *idTable) len() int { return tb.n }

// each calls f for every registered transfer, in no order. f may del the
// id it is given.
func (tb *idTable) each(f func(id uint64, t *transfer)) {
	for key, p := range tb.pages {
		for i, t := range &p.ts {
			if t != nil {
				f(key<<idPageShift|uint64(i), t)
			}
		}
	}
}

package tagindex

import (
	"sync"
)

// The DART partition. The radix tree of terms is cut at depth two: each
// term falls in the cell of its first two bytes (a one-byte term in the
// cell of that byte and 0, the empty term in cell 0). The 65536 cells, in
// byte order, are split into as many contiguous runs as there are metadata
// servers, each run of about equal weight, so that every server holds one
// subtree range and a prefix of two bytes or more lives on exactly one
// server (a one-byte prefix on a contiguous few).
//
// Weights stand in for how often a byte leads a key or value: lower-case
// letters and digits most, then upper case, then the usual separators, then
// other printable bytes, then the rest. The split is a pure function of the
// server count, so every client and server computes the same one and it
// changes only when the count does (when the index moves, see metaserver
// migrate.go).

const cells = 1 << 16

func byteWeight(c byte) uint64 {
	switch {
	case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		return 64
	case c >= 'A' && c <= 'Z':
		return 32
	case c == '_' || c == '-' || c == '.' || c == '/' || c == ':' || c == ' ':
		return 16
	case c > ' ' && c < 0x7f:
		return 8
	}
	return 1
}

// Partition maps terms to metadata server indexes for one server count.
// Safe for concurrent use.
type Partition struct {
	m int
	// bounds[i] is the first cell of server i+1.
	bounds []int
}

var partitions sync.Map // int -> *Partition

// For returns the partition of terms over m metadata servers (m >= 1).
func For(m int) *Partition {
	if m < 1 {
		m = 1
	}
	if p, ok := partitions.Load(m); ok {
		return p.(*Partition)
	}
	p := build(m)
	partitions.Store(m, p)
	return p
}

func build(m int) *Partition {
	var w [256]uint64
	var total uint64
	for c := range 256 {
		w[c] = byteWeight(byte(c))
		total += w[c]
	}
	total *= total
	p := &Partition{m: m, bounds: make([]int, 0, m-1)}
	var cum uint64
	next := 1
	for c := 0; c < cells && next < m; c++ {
		// Cell c starts server next once the weight before it reaches
		// next/m of the total.
		for next < m && cum*uint64(m) >= total*uint64(next) {
			p.bounds = append(p.bounds, c)
			next++
		}
		cum += w[c>>8] * w[c&0xff]
	}
	for len(p.bounds) < m-1 {
		p.bounds = append(p.bounds, cells)
	}
	return p
}

// Servers is the number of servers of the partition.
func (p *Partition) Servers() int { return p.m }

func cellOf(term string) int {
	switch len(term) {
	case 0:
		return 0
	case 1:
		return int(term[0]) << 8
	}
	return int(term[0])<<8 | int(term[1])
}

func (p *Partition) ownerOfCell(c int) int {
	// Every index entry asks this: a plain binary search, without the
	// call per step that sort.Search makes.
	lo, hi := 0, len(p.bounds)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if p.bounds[m] > c {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// Owner is the index of the server that holds term.
func (p *Partition) Owner(term string) int { return p.ownerOfCell(cellOf(term)) }

// PrefixOwners returns the first and last index of the servers that hold
// terms beginning with prefix: one for a prefix of two bytes or more, a
// contiguous run for shorter ones (all servers for the empty prefix).
func (p *Partition) PrefixOwners(prefix string) (first, last int) {
	switch len(prefix) {
	case 0:
		return 0, p.m - 1
	case 1:
		c := int(prefix[0]) << 8
		return p.ownerOfCell(c), p.ownerOfCell(c | 0xff)
	}
	o := p.Owner(prefix)
	return o, o
}

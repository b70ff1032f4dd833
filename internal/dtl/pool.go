package dtl

import "sync"

// connPool keeps up to max idle connections per peer for reuse.
type connPool[C any] struct {
	max     int
	discard func(C)

	mu     sync.Mutex
	idle   map[string][]C
	closed bool
}

func newConnPool[C any](max int, discard func(C)) *connPool[C] {
	return &connPool[C]{max: max, discard: discard, idle: map[string][]C{}}
}

// get returns an idle connection to peer, or the zero C.
func (p *connPool[C]) get(peer string) C {
	p.mu.Lock()
	defer p.mu.Unlock()
	cs := p.idle[peer]
	var c C
	if len(cs) > 0 {
		c = cs[len(cs)-1]
		p.idle[peer] = cs[:len(cs)-1]
	}
	return c
}

// put keeps c for reuse if it is healthy and there is room.
func (p *connPool[C]) put(peer string, c C, healthy bool) {
	p.mu.Lock()
	if healthy && !p.closed && len(p.idle[peer]) < p.max {
		p.idle[peer] = append(p.idle[peer], c)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.discard(c)
}

func (p *connPool[C]) close() {
	p.mu.Lock()
	p.closed = true
	all := p.idle
	p.idle = map[string][]C{}
	p.mu.Unlock()
	for _, cs := range all {
		for _, c := range cs {
			p.discard(c)
		}
	}
}

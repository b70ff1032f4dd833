package dataserver

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

func i32(v int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }

func leafI(op uint32, v int32) wire.QueryNode { return wire.QueryNode{Op: op, Value: i32(v)} }

func qbox(b region.Box) wire.QueryBox { return wire.QueryBox{Off: b.Off, Size: b.Size} }

// runQuery sends a query and parses its answer.
func runQuery(t *testing.T, c *rpc.Conn, q *wire.DataQuery) (wire.DataQueryResult, []uint64, []byte, error) {
	t.Helper()
	var res wire.DataQueryResult
	rep, err := c.Call(testCtx(t), wire.MethodDataQuery, q.Marshal(nil), nil, nil)
	if err != nil {
		return res, nil, nil, err
	}
	if err := res.Unmarshal(rep.Header); err != nil {
		t.Fatal(err)
	}
	idx, vals, err := wire.ParseQueryResult(&res, rep.Payload)
	if err != nil {
		t.Fatal(err)
	}
	return res, idx, vals, nil
}

// TestQueryAgainstNaive writes the top 12 of 16 rows of a 16x10 int32
// object (the rest never written: zeros), and checks predicates, with and
// without a region, over chunks smaller than a row and larger, against
// the same predicate evaluated in the test.
func TestQueryAgainstNaive(t *testing.T) {
	for _, chunk := range []int64{4, 12, 64, 1 << 20} {
		e := newEnv(t, Config{queryChunk: chunk})
		c := e.dial("q")
		dims := []uint64{16, 10}
		vals := make([]int32, 160)
		data := make([]byte, 0, 12*10*4)
		for i := range 120 {
			vals[i] = int32(i%17) - 8
			data = append(data, i32(vals[i])...)
		}
		if _, err := start(testCtx(t), c, []wire.DataItem{item(1, true, dims, []uint64{0, 0}, []uint64{12, 10})}, data); err != nil {
			t.Fatal(err)
		}
		whole := region.Shape(dims...)
		cases := []struct {
			name   string
			nodes  []wire.QueryNode
			within *region.Box
			match  func(v int32) bool
		}{
			{"gt", []wire.QueryNode{leafI(wire.QueryGT, 3)}, nil, func(v int32) bool { return v > 3 }},
			{"lt", []wire.QueryNode{leafI(wire.QueryLT, -5)}, nil, func(v int32) bool { return v < -5 }},
			{"eq zero", []wire.QueryNode{leafI(wire.QueryEQ, 0)}, nil, func(v int32) bool { return v == 0 }},
			{"and", []wire.QueryNode{leafI(wire.QueryGTE, -2), leafI(wire.QueryLTE, 2), {Op: wire.QueryAND}}, nil,
				func(v int32) bool { return v >= -2 && v <= 2 }},
			{"or", []wire.QueryNode{leafI(wire.QueryLT, -7), leafI(wire.QueryGT, 7), {Op: wire.QueryOR}}, nil,
				func(v int32) bool { return v < -7 || v > 7 }},
			{"within", []wire.QueryNode{leafI(wire.QueryGT, 0)}, &region.Box{Off: []uint64{3, 2}, Size: []uint64{11, 5}},
				func(v int32) bool { return v > 0 }},
		}
		for _, tc := range cases {
			for _, ret := range []uint32{wire.QueryCount, wire.QuerySelection, wire.QueryValues} {
				q := &wire.DataQuery{Version: wire.QueryVersion, Obj: 1, Dims: dims, Type: uint32(region.Int), Nodes: tc.nodes,
					Boxes: []wire.QueryBox{qbox(whole)}, Return: ret}
				area := whole
				if tc.within != nil {
					w := qbox(*tc.within)
					q.Within, area = &w, *tc.within
				}
				var wantIdx []uint64
				var wantVals []byte
				region.Runs(whole, area, func(r region.Run) bool {
					for i := r.Off; i < r.Off+r.Len; i++ {
						if tc.match(vals[i]) {
							wantIdx = append(wantIdx, i)
							wantVals = append(wantVals, i32(vals[i])...)
						}
					}
					return true
				})
				res, idx, got, err := runQuery(t, c, q)
				if err != nil {
					t.Fatalf("chunk %d %s: %v", chunk, tc.name, err)
				}
				if res.Hits != uint64(len(wantIdx)) {
					t.Fatalf("chunk %d %s return %d: %d hits, want %d", chunk, tc.name, ret, res.Hits, len(wantIdx))
				}
				if ret >= wire.QuerySelection && !slices.Equal(idx, wantIdx) {
					t.Fatalf("chunk %d %s: selection %v, want %v", chunk, tc.name, idx, wantIdx)
				}
				if ret == wire.QueryValues && !slices.Equal(got, wantVals) {
					t.Fatalf("chunk %d %s: values differ", chunk, tc.name)
				}
			}
		}
	}
}

// TestQueryBadInput: each bad request fails with a clear error and the
// server keeps serving.
func TestQueryBadInput(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dial("q")
	dims := []uint64{4, 4}
	if _, err := start(testCtx(t), c, []wire.DataItem{item(1, true, dims, []uint64{0, 0}, []uint64{4, 4})}, make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	good := func() *wire.DataQuery {
		return &wire.DataQuery{Version: wire.QueryVersion, Obj: 1, Dims: dims, DimsVersion: 0, Type: uint32(region.Int),
			Nodes: []wire.QueryNode{leafI(wire.QueryEQ, 0)}, Boxes: []wire.QueryBox{qbox(region.Shape(dims...))}}
	}
	cases := []struct {
		name string
		edit func(q *wire.DataQuery)
		want error
	}{
		{"version", func(q *wire.DataQuery) { q.Version = 9 }, pdc.ErrProtocol},
		{"string type", func(q *wire.DataQuery) { q.Type = uint32(region.String); q.Nodes[0].Value = []byte{0} }, pdc.ErrInvalid},
		{"unknown type", func(q *wire.DataQuery) { q.Type = 77 }, pdc.ErrInvalid},
		{"type size differs from the object's", func(q *wire.DataQuery) {
			q.Type = uint32(region.Double)
			q.Nodes[0].Value = make([]byte, 8)
		}, pdc.ErrInvalid},
		{"box outside dims", func(q *wire.DataQuery) { q.Boxes[0] = qbox(region.Box{Off: []uint64{2, 0}, Size: []uint64{4, 4}}) }, pdc.ErrOutOfRange},
		{"within outside dims", func(q *wire.DataQuery) { w := qbox(region.Shape(5, 4)); q.Within = &w }, pdc.ErrOutOfRange},
		{"box ndim", func(q *wire.DataQuery) { q.Boxes[0] = qbox(region.Shape(4)) }, pdc.ErrInvalid},
		{"no dims", func(q *wire.DataQuery) { q.Dims = nil }, pdc.ErrInvalid},
		{"dangling and", func(q *wire.DataQuery) { q.Nodes = append(q.Nodes, wire.QueryNode{Op: wire.QueryAND}) }, pdc.ErrInvalid},
		{"two roots", func(q *wire.DataQuery) { q.Nodes = append(q.Nodes, leafI(wire.QueryEQ, 1)) }, pdc.ErrInvalid},
		{"no predicate", func(q *wire.DataQuery) { q.Nodes = nil }, pdc.ErrInvalid},
		{"short value", func(q *wire.DataQuery) { q.Nodes[0].Value = []byte{1} }, pdc.ErrInvalid},
		{"return kind", func(q *wire.DataQuery) { q.Return = 7 }, pdc.ErrInvalid},
		{"storage", func(q *wire.DataQuery) { q.Storage = 9 }, pdc.ErrInvalid},
	}
	for _, tc := range cases {
		q := good()
		tc.edit(q)
		if _, _, _, err := runQuery(t, c, q); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
		if res, _, _, err := runQuery(t, c, good()); err != nil || res.Hits != 16 {
			t.Fatalf("after %s: %+v %v", tc.name, res, err)
		}
	}
	// A newer layout seen makes an older one stale.
	q := good()
	q.DimsVersion = 2
	if _, _, _, err := runQuery(t, c, q); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := runQuery(t, c, good()); !errors.Is(err, pdc.ErrStale) {
		t.Fatalf("stale dims: %v", err)
	}
	// An object never written here reads as zeros.
	q = good()
	q.Obj, q.DimsVersion = 99, 0
	if res, _, _, err := runQuery(t, c, q); err != nil || res.Hits != 16 {
		t.Fatalf("never written: %+v %v", res, err)
	}
}

// TestQuerySelectionBounded: a selection larger than MaxTransfer is
// refused, the count still works.
func TestQuerySelectionBounded(t *testing.T) {
	e := newEnv(t, Config{MaxTransfer: 100})
	c := e.dial("q")
	dims := []uint64{64}
	q := &wire.DataQuery{Version: wire.QueryVersion, Obj: 3, Dims: dims, Type: uint32(region.Int),
		Nodes: []wire.QueryNode{leafI(wire.QueryEQ, 0)}, Boxes: []wire.QueryBox{qbox(region.Shape(dims...))}, Return: wire.QuerySelection}
	if _, _, _, err := runQuery(t, c, q); !errors.Is(err, pdc.ErrTooLarge) {
		t.Fatalf("big selection: %v", err)
	}
	q.Return = wire.QueryCount
	if res, _, _, err := runQuery(t, c, q); err != nil || res.Hits != 64 {
		t.Fatalf("count: %+v %v", res, err)
	}
}

func TestChunks(t *testing.T) {
	box := region.Box{Off: []uint64{1, 2, 3}, Size: []uint64{3, 4, 5}}
	for _, limit := range []uint64{1, 3, 5, 7, 20, 21, 40, 60, 1000} {
		var got []uint64
		chunks(box, limit, func(c region.Box) bool {
			if c.Volume() > limit || !box.Contains(c) {
				t.Fatalf("limit %d: chunk %v", limit, c)
			}
			region.Runs(region.Shape(10, 10, 10), c, func(r region.Run) bool {
				for i := r.Off; i < r.Off+r.Len; i++ {
					got = append(got, i)
				}
				return true
			})
			return true
		})
		var want []uint64
		region.Runs(region.Shape(10, 10, 10), box, func(r region.Run) bool {
			for i := r.Off; i < r.Off+r.Len; i++ {
				want = append(want, i)
			}
			return true
		})
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: chunks cover %v, want %v", limit, got, want)
		}
	}
}

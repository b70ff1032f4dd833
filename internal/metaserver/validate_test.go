package metaserver

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// The server refuses what a buggy or hostile client sends (issue 25, case
// 9): each bad create, set-dims and tag put fails with an error naming what
// is wrong, and stores nothing.
// createResult creates object name with props p on s and returns the
// item's result.
func createResult(t *testing.T, s *Service, name string, p wire.ObjectProps) wire.ObjResult {
	t.Helper()
	b := wire.ObjBatch{Creates: []wire.ObjCreate{{ContID: 1, Name: name, Props: p}}}
	resp, err := s.objCreate(context.Background(), &rpc.Request{Header: b.Marshal(nil), Client: "c"})
	if err != nil {
		t.Fatal(err)
	}
	var r wire.ObjResults
	if err := r.Unmarshal(resp.Header); err != nil {
		t.Fatal(err)
	}
	return r.Items[0]
}

// goodProps are the properties of an object the server accepts.
func goodProps() wire.ObjectProps {
	return wire.ObjectProps{Dims: []uint64{4, 4}, Type: int32(region.Int64)}
}

func TestServerRefusesBadInput(t *testing.T) {
	s := newSvc(t)
	defer s.Close()
	ok := goodProps()
	for _, tc := range []struct {
		what  string
		name  string
		props func(p *wire.ObjectProps)
		code  wire.Code
		want  string
	}{
		{"unknown storage mode", "s", func(p *wire.ObjectProps) { p.Storage = 3 }, wire.CodeOf(pdc.ErrInvalid), "unknown storage mode 3"},
		{"storage mode with high bits", "s2", func(p *wire.ObjectProps) { p.Storage = 1 << 8 }, wire.CodeOf(pdc.ErrInvalid), "unknown storage mode 256"},
		{"dims past 2^63 bytes", "big", func(p *wire.ObjectProps) { p.Dims = []uint64{1 << 40, 1 << 21} }, wire.CodeOf(pdc.ErrOutOfRange), "pass 2^63 bytes"},
		{"dims wrapping to 0 bytes", "wrap", func(p *wire.ObjectProps) { p.Dims = []uint64{1 << 32, 1 << 29} }, wire.CodeOf(pdc.ErrOutOfRange), "pass 2^63 bytes"},
		{"an unlimited dim's row past 2^63", "row", func(p *wire.ObjectProps) { p.Dims = []uint64{math.MaxUint64, 1 << 61} }, wire.CodeOf(pdc.ErrOutOfRange), "pass 2^63 bytes"},
		{"a newline in the name", "two\nlines", nil, wire.CodeOf(pdc.ErrInvalid), `"two\nlines" has a control character (U+000A)`},
		{"an escape sequence in the name", "\x1b[2J", nil, wire.CodeOf(pdc.ErrInvalid), "control character (U+001B)"},
		{"invalid UTF-8 in the name", "bad\xc3", nil, wire.CodeOf(pdc.ErrInvalid), "not valid UTF-8"},
		{"a control character in the app name", "app", func(p *wire.ObjectProps) { p.AppName = "a\tb" }, wire.CodeOf(pdc.ErrInvalid), "app name"},
	} {
		p := ok
		p.Dims = append([]uint64(nil), ok.Dims...)
		if tc.props != nil {
			tc.props(&p)
		}
		r := createResult(t, s, tc.name, p)
		if r.Code != tc.code || !strings.Contains(r.Message, tc.want) {
			t.Errorf("create with %s: code %d %q; want code %d saying %q", tc.what, r.Code, r.Message, tc.code, tc.want)
		}
	}
	if n := s.countObjects(t); n != 0 {
		t.Fatalf("%d objects stored after refused creates", n)
	}
}

func TestServerRefusesBadContainerNames(t *testing.T) {
	s := newSvc(t)
	defer s.Close()
	ctx := context.Background()
	_, err := s.contCreate(ctx, &rpc.Request{Header: (&wire.ContCreate{Name: "c\x00nt\x07"}).Marshal(nil)})
	if !errors.Is(err, pdc.ErrInvalid) {
		t.Errorf("container with a NUL: %v", err)
	}
	_, err = s.contCreate(ctx, &rpc.Request{Header: (&wire.ContCreate{Name: "bell\x07"}).Marshal(nil)})
	if !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), "container name") {
		t.Errorf("container with a control character: %v", err)
	}
}

// Set-dims and tag puts of an object that exists.
func TestServerRefusesBadDimsAndTags(t *testing.T) {
	s := newSvc(t)
	defer s.Close()
	ctx := context.Background()
	r := createResult(t, s, "good", goodProps())
	if r.Code != 0 {
		t.Fatal(r.Message)
	}
	id := r.Meta.ID
	_, err := s.objSetDims(ctx, &rpc.Request{Header: (&wire.SetDims{ID: id, Dims: []uint64{1 << 59, 4}}).Marshal(nil)})
	if !errors.Is(err, pdc.ErrOutOfRange) || !strings.Contains(err.Error(), `"good"`) {
		t.Errorf("set-dims past 2^63 bytes: %v", err)
	}
	for _, tc := range []struct {
		put  wire.TagPut
		want string
	}{
		{wire.TagPut{Name: "n", Type: int32(region.Int64), Value: []byte{1, 2, 3, 4}}, "a int64 value is 8 bytes, this one is 4"},
		{wire.TagPut{Name: "n", Type: int32(region.Double), Value: make([]byte, 16)}, "is 8 bytes, this one is 16"},
		{wire.TagPut{Name: "new\nline", Type: int32(region.String), Value: []byte("v")}, "control character"},
		{wire.TagPut{Name: "\xff", Type: int32(region.String), Value: []byte("v")}, "not valid UTF-8"},
	} {
		tc.put.ID = id
		resp, err := s.tagPut(ctx, &rpc.Request{Header: (&wire.TagBatch{Puts: []wire.TagPut{tc.put}}).Marshal(nil)})
		if err != nil {
			t.Fatal(err)
		}
		var res wire.TagResults
		if err := res.Unmarshal(resp.Header); err != nil {
			t.Fatal(err)
		}
		if res.Codes[0] != uint64(wire.CodeOf(pdc.ErrInvalid)) || !strings.Contains(res.Messages[0], tc.want) {
			t.Errorf("tag put %+v: code %d %q; want invalid saying %q", tc.put, res.Codes[0], res.Messages[0], tc.want)
		}
	}
	resp, err := s.tagPut(ctx, &rpc.Request{Header: (&wire.TagBatch{Puts: []wire.TagPut{{ID: id, Name: "ok", Type: int32(region.Int64), Value: make([]byte, 8)}}}).Marshal(nil)})
	var res wire.TagResults
	if err != nil || res.Unmarshal(resp.Header) != nil || res.Codes[0] != 0 {
		t.Fatalf("a good tag put failed: %v %+v", err, res)
	}
}

// countObjects counts the object records in the store.
func (s *Service) countObjects(t *testing.T) int {
	t.Helper()
	n := 0
	if err := s.scan([]byte{'O'}, func(k, v []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

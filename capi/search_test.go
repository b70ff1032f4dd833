package capi_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/pdcgo/pdc/capi"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// goClient connects a Go client to tc, for tagging objects that libpdc's
// object functions (another part) are not needed for.
func (tc *testCluster) goClient(t *testing.T) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, client.WithTmpDir(tc.tmpdir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// queryKVTag is PDC_Client_query_kvtag with a value of len(v) bytes; nil
// is a NULL value (any value).
func (p *proc) queryKVTag(name string, typ int, v []byte) ([]uint64, int) {
	var ptr unsafe.Pointer
	if v != nil {
		ptr = unsafe.Pointer(unsafe.SliceData(v))
	}
	return p.QueryKVTag(name, typ, ptr, uint64(len(v)))
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func TestQueryKVTagFindsObjectTags(t *testing.T) {
	tc := startCluster(t, "node-a", "node-b")
	c := tc.goClient(t)
	ctx := context.Background()
	ct, _, err := c.CreateContainer(ctx, "kv", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string][]client.TagValue{
		"o1": {client.String("abcd"), client.Int32(42), client.Float64(2.5)},
		"o2": {client.String("abzz"), client.Int32(7), client.Float64(0.1)},
		"o3": {client.String("xbcx"), client.Int32(42), client.Float64(3)},
	}
	ids := map[string]uint64{}
	for _, name := range []string{"o1", "o2", "o3"} {
		o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: []uint64{4}, Type: region.Int})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close(ctx)
		ids[name] = o.Info().ID
		for i, key := range []string{"label", "count", "ratio"} {
			if err := o.PutTag(ctx, key, tags[name][i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := func(names ...string) []uint64 {
		var out []uint64
		for _, n := range names {
			out = append(out, ids[n])
		}
		slices.Sort(out)
		return out
	}
	p := tc.node("node-a")
	pdcID := p.init(t)
	checkQueryTags(t, p, pdcID, want)
	str := func(s string) []byte { return append([]byte(s), 0) } // as C passes strlen+1
	for _, tt := range []struct {
		name  string
		typ   region.Type
		value []byte
		want  []uint64
	}{
		{"label", region.String, str("abcd"), want("o1")},
		{"label", region.String, str("ab*"), want("o1", "o2")},
		{"label", region.String, str("*cd"), want("o1")},
		{"label", region.String, str("*bc*"), want("o1", "o3")},
		{"lab*", region.String, str("*bc*"), want("o1", "o3")},
		{"*bel", region.String, str("nothing*"), nil},
		{"count", region.Int, le32(42), want("o1", "o3")},
		{"count", region.Int64, le64(7), want("o2")},
		{"ratio", region.Double, le64(math.Float64bits(0.1)), want("o2")},
		{"ratio", region.Float, le32(math.Float32bits(3)), want("o3")},
		{"count", region.Int, le32(5), nil},
		{"ratio", region.String, nil, want("o1", "o2", "o3")}, // NULL value: any
	} {
		// Many queries in one process, some matching nothing (PDC double-frees).
		for range 2 {
			got, rc := p.queryKVTag(tt.name, int(tt.typ), tt.value)
			if rc != capi.Succeed || !slices.Equal(got, tt.want) {
				t.Errorf("query %s %v %q: %v rc %d, want %v (reports %q)", tt.name, tt.typ, tt.value, got, rc, tt.want, p.lines())
			}
		}
	}
	p.quiet(t)

	// Removing an index entry leaves the tag, which query_kvtag still finds.
	if rc := p.DARTDelete(capi.DARTHash, "label", "abcd", capi.RefPrimaryID, ids["o1"]); rc != capi.Succeed {
		t.Fatalf("DARTDelete: %q", p.lines())
	}
	if got, _ := p.queryKVTag("label", int(region.String), str("*bc*")); !slices.Equal(got, want("o1", "o3")) {
		t.Errorf("after a DART delete, query_kvtag found %v", got)
	}

	checkBadKVTagQueries(t, p)
}

// checkQueryTags checks pdc_query_tags (pdc query's language, ranges
// included, with names) and pdc_obj_tag_names on the objects above.
func checkQueryTags(t *testing.T, p *proc, pdcID uint64, want func(...string) []uint64) {
	t.Helper()
	for q, names := range map[string][]string{"count=10..50": {"o1", "o3"}, "ratio=..1": {"o2"}, "label=ab*": {"o1", "o2"}, "count=100..": nil} {
		ms, rc := p.QueryTags(pdcID, q, true)
		var ids []uint64
		var got []string
		for _, m := range ms {
			ids, got = append(ids, m.ID), append(got, m.Name)
		}
		slices.Sort(got)
		if rc != capi.Succeed || !slices.Equal(ids, want(names...)) || !slices.Equal(got, names) {
			t.Errorf("pdc_query_tags(%q): %v %v rc %d, want %v %v (reports %q)", q, ids, got, rc, want(names...), names, p.lines())
		}
	}
	if _, rc := p.QueryTags(pdcID, "count=5..x", false); rc != capi.Fail {
		t.Error("pdc_query_tags of a bad range succeeded")
	}
	p.wantLine(t, `pdc_query_tags(pdc`, `"count=5..x"`)
	if _, rc := p.QueryTags(pdcID+1000, "count", false); rc != capi.Fail {
		t.Error("pdc_query_tags through no connection succeeded")
	}
	p.wantLine(t, "pdc_query_tags")
	o := p.ObjOpen("o2", pdcID)
	names, rc := p.ObjTagNames(o)
	if o == 0 || rc != capi.Succeed || !slices.Equal(names, []string{"count", "label", "ratio"}) {
		t.Errorf("pdc_obj_tag_names(o2): %q rc %d (reports %q)", names, rc, p.lines())
	}
	p.ObjClose(o)
	if _, rc := p.ObjTagNames(o); rc != capi.Fail {
		t.Error("pdc_obj_tag_names of a closed object succeeded")
	}
	p.wantLine(t, "pdc_obj_tag_names")
}

// checkBadKVTagQueries checks that query_kvtag of bad input fails with its
// line, and that a size past the tag value limit fails before the value is
// read.
func checkBadKVTagQueries(t *testing.T, p *proc) {
	t.Helper()
	str := func(s string) []byte { return append([]byte(s), 0) }
	if _, rc := p.queryKVTag("", int(region.String), str("x")); rc != capi.Fail {
		t.Error("an empty name succeeded")
	}
	p.wantLine(t, `PDC_Client_query_kvtag("", pdc_var_type_t 4, 2 bytes)`, "tag name is empty")
	if _, rc := p.queryKVTag("label", 99, str("x")); rc != capi.Fail {
		t.Error("a bad type succeeded")
	}
	p.wantLine(t, "unknown pdc_var_type_t 99")
	if _, rc := p.queryKVTag("label", int(region.String), str("a*b")); rc != capi.Fail {
		t.Error("a misplaced * succeeded")
	}
	p.wantLine(t, "misplaced *")
	// A size past the tag value limit fails before the value is read (a
	// 1-byte buffer here; C passes whatever kvtag->size says).
	var one byte
	for _, size := range []uint64{1<<16 + 1, 1 << 31, 1<<32 - 1} {
		if _, rc := p.QueryKVTag("label", int(region.String), unsafe.Pointer(&one), size); rc != capi.Fail {
			t.Errorf("a %d-byte value succeeded", size)
		}
		p.wantLine(t, fmt.Sprintf(`PDC_Client_query_kvtag("label", pdc_var_type_t 4, %d bytes)`, size), "over the limit of 65536")
	}
}

func TestQueryKVTagNeedsAConnection(t *testing.T) {
	p := newProc(map[string]string{})
	if _, rc := p.queryKVTag("x", int(region.Int), le32(1)); rc != capi.Fail {
		t.Fatal("a query without PDCinit succeeded")
	}
	p.wantLine(t, "PDC_Client_query_kvtag", "call PDCinit first")
	if _, rc := p.DARTSearch(capi.DARTHash, "a=b", capi.RefPrimaryID); rc != capi.Fail {
		t.Fatal("a DART search without PDCinit succeeded")
	}
	p.wantLine(t, "PDC_Client_search_obj_ref_through_dart", "call PDCinit first")
}

// The cases: key "abcd", value "1234", found by exact, prefix,
// suffix and infix queries; deleting removes the suffix entries too.
func TestDART(t *testing.T) {
	tc := startCluster(t, "node-a", "node-b", "node-c")
	p := tc.node("node-a")
	p.init(t)
	const id, other = 1001, 1002
	for _, algo := range []int{capi.DHTFullHash, capi.DHTInitialHash, capi.DARTHash} {
		if rc := p.DARTInsert(algo, "abcd", "1234", capi.RefPrimaryID, id); rc != capi.Succeed {
			t.Fatalf("insert: %q", p.lines())
		}
	}
	if rc := p.DARTInsert(capi.DARTHash, "abxx", "1299", capi.RefPrimaryID, other); rc != capi.Succeed {
		t.Fatalf("insert: %q", p.lines())
	}
	search := func(q string) []uint64 {
		t.Helper()
		ids, rc := p.DARTSearch(capi.DARTHash, q, capi.RefPrimaryID)
		if rc != capi.Succeed {
			t.Fatalf("search %q: %q", q, p.lines())
		}
		return ids
	}
	for q, want := range map[string][]uint64{
		"abcd=1234":   {id},
		"ab*=12*":     {id, other},
		"*cd=*34":     {id},
		"*bc*=*23*":   {id},
		"abcd=9*":     nil,
		"nokey=1234":  nil,
		"*x*=*":       {other},
		"*xx=1299":    {other},
		"ab*=*2*":     {id, other},
		"abcd=123":    nil,
		"*bcd*=1234*": {id},
	} {
		if got := search(q); !slices.Equal(got, want) {
			t.Errorf("search %q: %v, want %v", q, got, want)
		}
	}
	if rc := p.DARTDelete(capi.DHTFullHash, "abcd", "1234", capi.RefPrimaryID, id); rc != capi.Succeed {
		t.Fatalf("delete: %q", p.lines())
	}
	for _, q := range []string{"abcd=1234", "ab*=12*", "*cd=*34", "*bc*=*23*"} {
		if got := search(q); slices.Contains(got, id) {
			t.Errorf("after delete, %q still finds %d: %v", q, id, got)
		}
	}
	if got := search("ab*=12*"); !slices.Equal(got, []uint64{other}) {
		t.Errorf("after delete, ab*=12*: %v, want the other entry", got)
	}
	p.quiet(t)

	for _, bad := range []struct {
		algo, ref int
		q, line   string
	}{
		{0, capi.RefPrimaryID, "a=b", "unknown dart_hash_algo_t 0"},
		{capi.DARTHash, 9, "a=b", "unknown dart_object_ref_type_t 9"},
		{capi.DARTHash, capi.RefPrimaryID, "abcd", "want key=value"},
	} {
		if _, rc := p.DARTSearch(bad.algo, bad.q, bad.ref); rc != capi.Fail {
			t.Errorf("search %d %q %d succeeded", bad.algo, bad.q, bad.ref)
		}
		p.wantLine(t, fmt.Sprintf("PDC_Client_search_obj_ref_through_dart(%d, %q, %d)", bad.algo, bad.q, bad.ref), bad.line)
	}
	if rc := p.DARTInsert(capi.DARTHash, "a*", "1", capi.RefPrimaryID, id); rc != capi.Fail {
		t.Error("inserting a key with * succeeded")
	}
	p.wantLine(t, "PDC_Client_insert_obj_ref_into_dart(3, \"a*\", \"1\", 1, 1001)", "could never be searched")
	if rc := p.DARTInsert(capi.DARTHash, "", "1", capi.RefPrimaryID, id); rc != capi.Fail {
		t.Error("inserting an empty key succeeded")
	}
	p.wantLine(t, "want a key of 1 to")
}

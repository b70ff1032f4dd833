package tagindex

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

func TestPartitionCoversAndIsBalanced(t *testing.T) {
	for _, m := range []int{1, 2, 3, 4, 7, 16, 100} {
		p := For(m)
		if p.Servers() != m || len(p.bounds) != m-1 || !sort.IntsAreSorted(p.bounds) {
			t.Fatalf("m=%d: bounds %v", m, p.bounds)
		}
		// Every server holds about its share of the weight of the cells.
		held := make([]uint64, m)
		var total uint64
		for c := range cells {
			w := byteWeight(byte(c>>8)) * byteWeight(byte(c))
			held[p.ownerOfCell(c)] += w
			total += w
		}
		for i, h := range held {
			if m <= 64 && (h*uint64(m) < total/2 || h*uint64(m) > total*2) {
				t.Fatalf("m=%d: server %d holds %d of %d: %v", m, i, h, total, held)
			}
		}
		// A prefix's servers hold every term with that prefix.
		rng := rand.New(rand.NewPCG(uint64(m), 2))
		for range 2000 {
			term := string([]byte{byte(rng.IntN(256)), byte(rng.IntN(256)), 'x'})[:rng.IntN(4)]
			o := p.Owner(term)
			for n := 0; n <= len(term); n++ {
				first, last := p.PrefixOwners(term[:n])
				if o < first || o > last {
					t.Fatalf("m=%d: %q on server %d, outside %d..%d of its prefix %q", m, term, o, first, last, term[:n])
				}
			}
		}
	}
}

func TestEscapeKeepsOrder(t *testing.T) {
	ss := []string{"", "\x00", "\x00\x00", "\x00\x01", "a", "a\x00", "a\x00b", "a\x01", "ab", "b", "\xff"}
	var enc [][]byte
	for _, s := range ss {
		e := appendEsc(nil, s)
		got, rest, err := readEsc(e)
		if err != nil || got != s || len(rest) != 0 {
			t.Fatalf("%q: decoded %q, %q, %v", s, got, rest, err)
		}
		if !bytes.HasPrefix(e, appendEscPrefix(nil, s)) {
			t.Fatalf("%q: the prefix form is not a prefix", s)
		}
		enc = append(enc, e)
	}
	if !slices.IsSortedFunc(enc, bytes.Compare) {
		t.Fatalf("escaping changes the order of %q", ss)
	}
}

func TestEntriesRoundTrip(t *testing.T) {
	long := string(bytes.Repeat([]byte("z"), MaxSuffixText+1))
	for _, c := range []struct {
		key  string
		typ  region.Type
		val  []byte
		want map[byte]int // entries per tree
	}{
		{"abcd", region.String, []byte("1234"), map[byte]int{TreeKey: 1, TreeValue: 1, TreeSufVal: 3}},
		{"k", region.String, []byte("a\x00b\x00"), map[byte]int{TreeKey: 1, TreeValue: 1, TreeSufVal: 2}},
		{"k", region.Int64, i64(-7), map[byte]int{TreeKey: 1}},
		{"k", region.String, []byte(long), map[byte]int{TreeKey: 1, TreeValue: 1, TreeLongVal: 1}},
	} {
		v := ValueOf(c.typ, c.val)
		ops := ObjectEntries(c.key, int32(c.typ), c.val, v, 42, true, false)
		got := map[byte]int{}
		for _, op := range ops {
			got[op.Key[1]]++
			e, err := DecodeEntry(op.Key, op.Value)
			if err != nil || e.ID != 42 || e.Key != c.key {
				t.Fatalf("%s=%q: entry %q decodes to %+v, %v", c.key, c.val, op.Key, e, err)
			}
			if op.Key[1] == TreeKey || op.Key[1] == TreeLongVal {
				if (e.Val.Num == nil) != (v.Num == nil) || e.Val.Text != v.Text || (v.Num != nil && v.Num.Cmp(e.Val.Num) != 0) {
					t.Fatalf("%s: value %+v, want %+v", c.key, e.Val, v)
				}
			}
			if _, err := For(5).EntryOwner(op.Key); err != nil {
				t.Fatal(err)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Fatalf("%s=%q: trees %v, want %v", c.key, c.val, got, c.want)
		}
		// The deletions name exactly the same keys.
		dels := ObjectEntries(c.key, int32(c.typ), c.val, v, 42, true, true)
		for i := range dels {
			if !dels[i].Del || !bytes.Equal(dels[i].Key, ops[i].Key) {
				t.Fatalf("deletion %d: %+v, set %+v", i, dels[i], ops[i])
			}
		}
	}
	for _, op := range DictEntries("abc", true) {
		term, key, err := DecodeDict(op.Key)
		if err != nil || key != "abc" || !bytes.Contains([]byte("abc"+Reverse("abc")), []byte(term)) {
			t.Fatalf("dictionary entry %q: %q %q %v", op.Key, term, key, err)
		}
	}
	if n := len(DictEntries("abc", false)); n != 2 {
		t.Fatalf("without suffix trees, %d dictionary entries for one key; want 2 (S and R)", n)
	}
}

// Numbers sort by value in K entries, across types.
func TestNumbersSortByValue(t *testing.T) {
	vals := []float64{-1e300, -5, -0.5, 0, 0.25, 1, 2, 1e10}
	var keys [][]byte
	for i, f := range vals {
		var typ region.Type
		var raw []byte
		if f == float64(int64(f)) && i%2 == 0 {
			typ, raw = region.Int64, i64(int64(f))
		} else {
			typ, raw = region.Double, f64(f)
		}
		ops := ObjectEntries("n", int32(typ), raw, ValueOf(typ, raw), 1, true, false)
		keys = append(keys, ops[0].Key)
	}
	if !slices.IsSortedFunc(keys, bytes.Compare) {
		t.Fatal("numeric K entries are not in value order")
	}
}

// The plans of each kind of query are data: testdata/query.txt.
func TestPlan(t *testing.T) {
	p := For(4)
	// Infix and suffix value plans ask server 0 too, for long texts.
	for _, q := range []string{"*=*zz*", "*=*zz"} {
		if plan := p.Plan(MustParse(q), true); plan.Servers[0] != 0 {
			t.Errorf("plan of %q, %+v, does not ask server 0", q, plan)
		}
	}
}

// FuzzDecode: decoding any key never panics, and the entries made from any
// key and text decode back to them.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("XKabcd\x00\x01s1234\x00\x01\x00\x00\x00\x00\x00\x00\x00\x2a"), "abcd", "1234")
	f.Add([]byte("XSab\x00\x01abc\x00\x01"), "k", "")
	f.Fuzz(func(t *testing.T, k []byte, key, text string) {
		_, _ = DecodeEntry(k, k)
		_, _, _ = DecodeDict(k)
		_, _, _ = Term(k)
		if key == "" {
			return
		}
		v := ValueOf(region.String, []byte(text))
		for _, op := range ObjectEntries(key, int32(region.String), []byte(text), v, 9, true, false) {
			e, err := DecodeEntry(op.Key, op.Value)
			if err != nil || e.Key != key || e.ID != 9 {
				t.Fatalf("%q=%q: entry %q decodes to %+v, %v", key, text, op.Key, e, err)
			}
		}
	})
}

// TestEntryOwnerOfAgreesWithEntryOwner: the fast owner reads the same
// server from every kind of entry, terms of zero, one and two bytes and
// escaped zero bytes included.
func TestEntryOwnerOfAgreesWithEntryOwner(t *testing.T) {
	terms := []string{"", "a", "\x00", "\x00\x00", "ab", "a\x00b", "zz", "\xff\xfe", "str109str", "k07"}
	for _, m := range []int{1, 2, 3, 4, 7} {
		p := For(m)
		for _, term := range terms {
			var keys [][]byte
			for _, op := range ObjectEntries(term, int32(region.String), []byte(term), Value{Text: term}, 42, true, false) {
				keys = append(keys, op.Key)
			}
			for _, op := range DictEntries(term+"x", true) {
				keys = append(keys, op.Key)
			}
			for _, k := range keys {
				want, err := p.EntryOwner(k)
				if err != nil {
					t.Fatal(err)
				}
				got, err := p.EntryOwnerOf(k)
				if err != nil || got != want {
					t.Fatalf("%d servers, entry %q: EntryOwnerOf = %d, %v; EntryOwner = %d", m, k, got, err, want)
				}
				if id, ok := EntryObject(k); ok != (k[1] != TreeSufKey && k[1] != TreeRevKey) || (ok && id != 42) {
					t.Fatalf("EntryObject(%q) = %d, %v", k, id, ok)
				}
			}
		}
	}
	for _, bad := range []string{"", "X", "Y", "XQabc", "XV", "XVa", "XVa\x00", "XV\x00\x07"} {
		if _, err := For(4).EntryOwnerOf([]byte(bad)); err == nil {
			t.Errorf("EntryOwnerOf(%q) = nil error", bad)
		}
	}
}

// TestCheckEntry: every entry the layout makes passes; keys cut short,
// with a bad escape, an unknown tree or bytes left over fail, as
// DecodeEntry and DecodeDict would fail on them.
func TestCheckEntry(t *testing.T) {
	var good [][]byte
	for _, term := range []string{"", "a", "a\x00b", "str109str"} {
		for _, op := range ObjectEntries(term, int32(region.String), []byte(term), Value{Text: term}, 42, true, false) {
			good = append(good, op.Key)
		}
		for _, op := range DictEntries(term+"x", true) {
			good = append(good, op.Key)
		}
	}
	for _, op := range ObjectEntries("n", int32(region.Int64), i64(-3), ValueOf(region.Int64, i64(-3)), 7, true, false) {
		good = append(good, op.Key)
	}
	long := strings.Repeat("y", MaxSuffixText+1)
	for _, op := range ObjectEntries("k", int32(region.String), []byte(long), Value{Text: long}, 9, true, false) {
		good = append(good, op.Key)
	}
	for _, k := range good {
		if err := CheckEntry(k); err != nil {
			t.Fatalf("CheckEntry(%q) = %v", k, err)
		}
		for n := 0; n < len(k); n++ {
			if CheckEntry(k[:n]) == nil && k[1] != TreeKey {
				// A cut K entry may still read as another K entry (a
				// number's raw bytes have no length), so only the
				// others are checked here.
				t.Fatalf("CheckEntry(%q), cut from %q, = nil", k[:n], k)
			}
		}
		if CheckEntry(append(append([]byte(nil), k...), 'x')) == nil && k[1] != TreeKey {
			t.Fatalf("CheckEntry(%q + x) = nil", k)
		}
	}
	for _, bad := range []string{"XKab", "XKab\x00\x07", "XVabc", "XSab\x00", "XQ\x00\x01", "YK\x00\x01s\x00\x0112345678"} {
		if err := CheckEntry([]byte(bad)); !errors.Is(err, pdc.ErrInvalid) {
			t.Errorf("CheckEntry(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

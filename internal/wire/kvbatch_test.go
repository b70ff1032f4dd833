package wire

import (
	"errors"
	"reflect"
	"testing"

	"github.com/pdcgo/pdc"
)

var kvSamples = []KVBatch{
	{},
	{Keys: [][]byte{[]byte("Ck")}, Values: [][]byte{[]byte("v")}},
	// Empty values are kept as elements, so keys and values stay paired.
	{Keys: [][]byte{[]byte("a"), []byte("b"), []byte("c")}, Values: [][]byte{{}, []byte("x"), {}}},
	{Keys: [][]byte{make([]byte, 300)}, Values: [][]byte{make([]byte, 70000)}},
}

func TestKVBatchRoundTrip(t *testing.T) {
	for i, want := range kvSamples {
		var got KVBatch
		if err := got.Unmarshal(want.Marshal(nil)); err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
		if len(want.Keys) == 0 {
			if len(got.Keys) != 0 || len(got.Values) != 0 {
				t.Fatalf("sample %d: got %+v", i, got)
			}
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("sample %d: got %+v, want %+v", i, got, want)
		}
	}
}

func TestKVBatchUnpairedIsAnError(t *testing.T) {
	b := (&KVBatch{Keys: [][]byte{[]byte("k")}, Values: [][]byte{[]byte("v")}}).Marshal(nil)
	b = append(b, (&KVBatch{Keys: [][]byte{[]byte("k2")}}).Marshal(nil)...)
	var m KVBatch
	if err := m.Unmarshal(b); !errors.Is(err, pdc.ErrProtocol) {
		t.Fatalf("2 keys, 1 value: got %v, want ErrProtocol", err)
	}
}

func FuzzKVBatch(f *testing.F) {
	for _, s := range kvSamples {
		f.Add(s.Marshal(nil))
	}
	f.Add([]byte{0x0a, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m KVBatch
		if err := m.Unmarshal(b); err != nil {
			if !errors.Is(err, pdc.ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
			return
		}
		var again KVBatch
		if err := again.Unmarshal(m.Marshal(nil)); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if len(m.Keys) != len(again.Keys) {
			t.Fatalf("keys %d != %d", len(m.Keys), len(again.Keys))
		}
		for i := range m.Keys {
			if string(m.Keys[i]) != string(again.Keys[i]) || string(m.Values[i]) != string(again.Values[i]) {
				t.Fatalf("entry %d changed", i)
			}
		}
	})
}

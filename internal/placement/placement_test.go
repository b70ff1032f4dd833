package placement

import (
	"fmt"
	"testing"
)

func TestKeyIsFNV1aPlusTimeStep(t *testing.T) {
	// FNV-1a of "" is the offset basis; of "a" a published vector.
	if got := Key("", 0); got != 0x811c9dc5 {
		t.Fatalf("Key(\"\") = %#x", got)
	}
	if got := Key("a", 0); got != 0xe40c292c {
		t.Fatalf("Key(\"a\") = %#x", got)
	}
	if Key("a", 7) != Key("a", 0)+7 {
		t.Fatal("time step not added")
	}
}

func TestIDCarriesOwnerForAnyServerCount(t *testing.T) {
	for i := range 1000 {
		name := fmt.Sprintf("obj%04d", i)
		key := Key(name, uint32(i%3))
		id := ID(key, uint32(i+1))
		if id == 0 || KeyOf(id) != key || SeqOf(id) != uint32(i+1) {
			t.Fatalf("%s: id %#x does not round-trip", name, id)
		}
		for m := 1; m <= 9; m++ {
			if OwnerOfID(id, m) != Owner(key, m) || Owner(key, m) >= m {
				t.Fatalf("%s: owner of id differs from owner of name for m=%d", name, m)
			}
		}
	}
}

func TestOwnersAreBalanced(t *testing.T) {
	const m, n = 4, 40000
	var count [m]int
	for i := range n {
		count[Owner(Key(fmt.Sprintf("particle_%d", i), 0), m)]++
	}
	for s, c := range count {
		if c < n/m*9/10 || c > n/m*11/10 {
			t.Fatalf("server %d owns %d of %d names: %v", s, c, n, count)
		}
	}
}

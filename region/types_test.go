package region

import "testing"

func TestTypesFollowPDCOrder(t *testing.T) {
	// pdc_var_type_t values, from pdc-c-api.md.
	want := map[Type]int32{Int: 0, Float: 1, Double: 2, Char: 3, String: 4, Boolean: 5, Short: 6, Uint: 7,
		Int64: 8, Uint64: 9, Int16: 10, Int8: 11, Uint8: 12, Uint16: 13, Int32: 14, Uint32: 15, Long: 16,
		VoidPtr: 17, SizeT: 18, Unknown: -1}
	for typ, v := range want {
		if int32(typ) != v {
			t.Errorf("%s = %d, want %d", typ, int32(typ), v)
		}
	}
	if typeCount != 19 {
		t.Fatalf("%d types, want 19 (PDC_TYPE_COUNT)", typeCount)
	}
}

func TestParseTypeRoundTrip(t *testing.T) {
	for typ := Type(0); typ < typeCount; typ++ {
		got, err := ParseType(typ.String())
		if err != nil || got != typ {
			t.Errorf("ParseType(%q) = %v, %v", typ.String(), got, err)
		}
		if typ.Size() < 1 || typ.Size() > 8 {
			t.Errorf("%s has size %d", typ, typ.Size())
		}
	}
	for alias, want := range map[string]Type{"float": Float, "double": Double, "F64": Double, "u8": Uint8} {
		if got, err := ParseType(alias); err != nil || got != want {
			t.Errorf("ParseType(%q) = %v, %v; want %v", alias, got, err, want)
		}
	}
	if _, err := ParseType("quaternion"); err == nil {
		t.Error("ParseType accepted an unknown type")
	}
	if Type(99).Valid() || Unknown.Valid() || Type(99).Size() != 0 {
		t.Error("invalid types report valid")
	}
}

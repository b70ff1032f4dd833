package metaserver

import (
	"testing"

	"github.com/pdcgo/pdc/internal/placement"
)

func TestKeyOwner(t *testing.T) {
	id := placement.ID(placement.Key("obj", 3), 9)
	cont := placement.ID(placement.Key("box", 0), 4)
	cases := []struct {
		key  []byte
		want uint32
	}{
		{keyCont("box"), placement.Key("box", 0)},
		{keyContID(cont), placement.Key("box", 0)},
		{keyObj(identity("obj", 3, 7, "app")), placement.Key("obj", 3)},
		{keyObjID(id), placement.Key("obj", 3)},
		{keyMember(cont, id), placement.Key("obj", 3)},
		{keyAdded(id, cont), placement.Key("obj", 3)},
		{keyTag(kindObject, id, "t"), placement.Key("obj", 3)},
		{keyTag(kindContainer, cont, "t"), placement.Key("box", 0)},
	}
	for _, c := range cases {
		got, ok := keyOwner(c.key)
		if !ok || got != c.want {
			t.Errorf("keyOwner(%q) = %#x, %v; want %#x", c.key, got, ok, c.want)
		}
	}
	for _, k := range [][]byte{{'S'}, {'V'}, nil, {'o', 1}, addedPrefix(id)} {
		if _, ok := keyOwner(k); ok {
			t.Errorf("keyOwner(%q) says movable", k)
		}
	}
}

package metaserver

import (
	"encoding/binary"

	"github.com/pdcgo/pdc/internal/metastore"
)

const (
	kindObject    = 0
	kindContainer = 1
)

func keyCont(name string) []byte { return append([]byte{'C'}, name...) }

func keyContID(id uint64) []byte { return binary.BigEndian.AppendUint64([]byte{'c'}, id) }

// identity is an object's unique identity: name, time step, user id, app.
func identity(name string, ts, uid uint32, app string) []byte {
	b := make([]byte, 0, len(name)+9+len(app))
	b = append(b, name...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint32(b, ts)
	b = binary.BigEndian.AppendUint32(b, uid)
	return append(b, app...)
}

// namePrefix is the identity prefix shared by every object of a name and
// time step.
func namePrefix(name string, ts uint32) []byte {
	b := append([]byte(name), 0)
	return binary.BigEndian.AppendUint32(b, ts)
}

func keyObj(ident []byte) []byte { return append([]byte{'O'}, ident...) }

func keyObjID(id uint64) []byte { return binary.BigEndian.AppendUint64([]byte{'o'}, id) }

func keyMember(cont, obj uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64([]byte{'M'}, cont), obj)
}

func memberPrefix(cont uint64) []byte { return binary.BigEndian.AppendUint64([]byte{'M'}, cont) }

// keyAdded is the reverse of the membership of an object added to a
// container other than its home: it lets the object's delete find them.
func keyAdded(obj, cont uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64([]byte{'m'}, obj), cont)
}

func addedPrefix(obj uint64) []byte { return binary.BigEndian.AppendUint64([]byte{'m'}, obj) }

func tagPrefix(kind byte, id uint64) []byte { return appendKeyTag(nil, kind, id, "") }

func keyTag(kind byte, id uint64, name string) []byte { return appendKeyTag(nil, kind, id, name) }

// appendKeyTag appends keyTag(kind, id, name) to b.
func appendKeyTag(b []byte, kind byte, id uint64, name string) []byte {
	return append(binary.BigEndian.AppendUint64(append(b, 'T', kind), id), name...)
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte { return metastore.PrefixEnd(p) }

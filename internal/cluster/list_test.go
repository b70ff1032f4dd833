package cluster

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

func testList(n int) *List {
	l := &List{Size: n, Created: time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC)}
	roles := []string{"both", "metadata", "data"}
	for i := range n {
		l.Servers = append(l.Servers, Server{
			Rank: i, Addr: "127.0.0.1:" + string(rune('0'+i)) + "000", Roles: roles[i%3], PID: 4000 + i,
			Host: "node1", Instance: "inst" + string(rune('a'+i)),
			Start: time.Date(2025, 3, 4, 5, 6, 7, i, time.UTC),
		})
	}
	return l
}

// sameList compares lists, times by instant.
func sameList(a, b *List) bool {
	if a.Size != b.Size || !a.Created.Equal(b.Created) || len(a.Servers) != len(b.Servers) {
		return false
	}
	for i := range a.Servers {
		x, y := a.Servers[i], b.Servers[i]
		if !x.Start.Equal(y.Start) {
			return false
		}
		x.Start, y.Start = time.Time{}, time.Time{}
		if x != y {
			return false
		}
	}
	return true
}

// dirNames lists dir, to check that nothing but the expected files is left.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestListRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{1, 3, 1, 7} { // overwrite with other sizes
		l := testList(n)
		if err := WriteList(dir, l); err != nil {
			t.Fatal(err)
		}
		got, err := ReadList(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !sameList(got, l) {
			t.Fatalf("size %d:\n got %+v\nwant %+v", n, got, l)
		}
		st, err := os.Stat(filepath.Join(dir, ListFile))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != 0o600 {
			t.Fatalf("list file mode %v, want -rw-------", st.Mode())
		}
		if names := dirNames(t, dir); !reflect.DeepEqual(names, []string{ListFile}) {
			t.Fatalf("dir holds %q, want only %s", names, ListFile)
		}
	}
}

func TestListFileIsFramedJSON(t *testing.T) {
	dir := t.TempDir()
	if err := WriteList(dir, testList(2)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, ListFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("pdc-server-list v1 crc32c=")) || !bytes.Contains(data, []byte(`"addr": "127.0.0.1:1000"`)) {
		t.Fatalf("list file is not a readable framed JSON list:\n%s", data)
	}
}

func TestReadListMissing(t *testing.T) {
	dir := t.TempDir()
	_, err := ReadList(dir)
	if !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("got %v, want pdc.ErrNotFound", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, filepath.Join(dir, ListFile)) || !strings.Contains(msg, "pdc up") || !strings.Contains(msg, "PDC_TMPDIR") {
		t.Fatalf("error %q does not name the path and say how to start servers", msg)
	}
}

func TestReadListTorn(t *testing.T) {
	dir := t.TempDir()
	if err := WriteList(dir, testList(3)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, ListFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(data) {
		if err := os.Truncate(path, int64(n)); err != nil {
			t.Fatal(err)
		}
		l, err := ReadList(dir)
		if err == nil {
			t.Fatalf("file truncated to %d of %d bytes read as %+v", n, len(data), l)
		}
		if !errors.Is(err, pdc.ErrChecksum) && !errors.Is(err, pdc.ErrProtocol) {
			t.Fatalf("truncated to %d: %v, want a checksum or protocol error", n, err)
		}
		if !strings.Contains(err.Error(), path) {
			t.Fatalf("truncated to %d: error %q does not name the file", n, err)
		}
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadList(dir); !strings.Contains(err.Error(), "empty or torn") {
		t.Fatalf("empty file: %v", err)
	}
}

func TestReadListEdited(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ListFile)
	if err := WriteList(dir, testList(3)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(data, []byte("127.0.0.1:1000"), []byte("127.0.0.2:1000"), 1)
	if bytes.Equal(edited, data) {
		t.Fatal("test list does not hold the address to edit")
	}
	if err := os.WriteFile(path, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ReadList(dir)
	if !errors.Is(err, pdc.ErrChecksum) || !strings.Contains(err.Error(), "checksum") || !strings.Contains(err.Error(), path) {
		t.Fatalf("edited body: %v", err)
	}
}

// A correctly framed file whose body is not a valid list.
func TestReadListBadBody(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ListFile)
	cases := []struct {
		name string
		data []byte
		want error
		msg  string
	}{
		{"not json", frameFile(listMagic, listVersion, []byte("size: 1\n")), pdc.ErrProtocol, "invalid character"},
		{"wrong json type", frameFile(listMagic, listVersion, []byte(`{"size": "one"}`)), pdc.ErrProtocol, "cannot unmarshal"},
		{"empty list", frameFile(listMagic, listVersion, []byte(`{"size": 0}`)), pdc.ErrInvalid, "0 servers for size 0"},
		{"missing rank", frameFile(listMagic, listVersion, []byte(`{"size": 2, "servers": [{"rank": 0, "addr": "a:1", "roles": "both"}]}`)),
			pdc.ErrInvalid, "1 servers for size 2"},
		{"bad role", frameFile(listMagic, listVersion, []byte(`{"size": 1, "servers": [{"rank": 0, "addr": "a:1", "roles": "gpu"}]}`)),
			pdc.ErrInvalid, `unknown role "gpu"`},
		{"rendezvous file", frameFile(rank0Magic, rank0Version, []byte(`{}`)), pdc.ErrProtocol, "pdc-rank0"},
		{"newer version", frameFile(listMagic, listVersion+1, []byte(`{}`)), pdc.ErrVersion, "format version 2"},
	}
	for _, c := range cases {
		if err := os.WriteFile(path, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := ReadList(dir)
		if err == nil {
			t.Fatalf("%s: read as %+v", c.name, l)
		}
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), path) {
			t.Fatalf("%s: error %q, want %v naming %s and saying %q", c.name, err, c.want, path, c.msg)
		}
	}
}

func TestListValidate(t *testing.T) {
	cases := []struct {
		name string
		edit func(l *List)
		msg  string
	}{
		{"size 0", func(l *List) { l.Size, l.Servers = 0, nil }, "0 servers for size 0"},
		{"negative size", func(l *List) { l.Size = -1 }, "for size -1"},
		{"too few servers", func(l *List) { l.Servers = l.Servers[:2] }, "2 servers for size 3"},
		{"too many servers", func(l *List) { l.Size = 2 }, "3 servers for size 2"},
		{"ranks out of order", func(l *List) { l.Servers[1], l.Servers[2] = l.Servers[2], l.Servers[1] }, "entry 1 has rank 2"},
		{"duplicate rank", func(l *List) { l.Servers[2].Rank = 1 }, "entry 2 has rank 1"},
		{"ranks from 1", func(l *List) {
			for i := range l.Servers {
				l.Servers[i].Rank++
			}
		}, "entry 0 has rank 1"},
		{"empty addr", func(l *List) { l.Servers[1].Addr = "" }, "rank 1 has no address"},
		{"empty roles", func(l *List) { l.Servers[0].Roles = "" }, "rank 0: unknown role"},
		{"unknown role", func(l *List) { l.Servers[2].Roles = "storage" }, `rank 2: unknown role "storage"`},
		{"unformattable roles", func(l *List) { l.Servers[2].Roles = RoleString(4) }, `unknown role "roles(4)"`},
	}
	if err := testList(3).Validate(); err != nil {
		t.Fatalf("valid list: %v", err)
	}
	for _, c := range cases {
		l := testList(3)
		c.edit(l)
		err := l.Validate()
		if !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), c.msg) {
			t.Fatalf("%s: got %v, want pdc.ErrInvalid saying %q", c.name, err, c.msg)
		}
		// WriteList refuses it and writes nothing.
		dir := t.TempDir()
		if err := WriteList(dir, l); !errors.Is(err, pdc.ErrInvalid) {
			t.Fatalf("%s: WriteList: %v", c.name, err)
		}
		if names := dirNames(t, dir); len(names) != 0 {
			t.Fatalf("%s: WriteList left %q", c.name, names)
		}
	}
}

func TestRendezvousRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadRendezvous(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no record: got %v, want fs.ErrNotExist", err)
	}
	for _, r := range []Rendezvous{
		{Addr: "127.0.0.1:4000", Instance: "abc123", Size: 4, PID: 999},
		{Addr: "unix:" + filepath.Join(dir, "sock", "rank-0.sock"), Instance: "def", Size: 1, PID: 1},
		{},
	} {
		if err := WriteRendezvous(dir, r); err != nil {
			t.Fatal(err)
		}
		got, err := ReadRendezvous(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got != r {
			t.Fatalf("got %+v, want %+v", got, r)
		}
		st, err := os.Stat(filepath.Join(dir, Rank0File))
		if err != nil || st.Mode() != 0o600 {
			t.Fatalf("rendezvous file: %v, %v", st, err)
		}
		if names := dirNames(t, dir); !reflect.DeepEqual(names, []string{Rank0File}) {
			t.Fatalf("dir holds %q", names)
		}
	}
	path := filepath.Join(dir, Rank0File)
	if err := os.WriteFile(path, frameFile(rank0Magic, rank0Version, []byte("not json")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRendezvous(dir); !errors.Is(err, pdc.ErrProtocol) || !strings.Contains(err.Error(), path) {
		t.Fatalf("bad body: %v", err)
	}
	if err := os.WriteFile(path, frameFile(listMagic, listVersion, []byte("{}")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRendezvous(dir); !errors.Is(err, pdc.ErrProtocol) {
		t.Fatalf("list file as rendezvous: %v", err)
	}
}

func TestRemoveFiles(t *testing.T) {
	dir := t.TempDir()
	if err := RemoveFiles(dir); err != nil {
		t.Fatalf("nothing to remove: %v", err)
	}
	if err := WriteList(dir, testList(1)); err != nil {
		t.Fatal(err)
	}
	if err := WriteRendezvous(dir, Rendezvous{Addr: "a:1"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "other"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RemoveFiles(dir); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, dir); !reflect.DeepEqual(names, []string{"other"}) {
		t.Fatalf("after RemoveFiles dir holds %q", names)
	}
}

func TestParseRoles(t *testing.T) {
	cases := []struct {
		in   string
		want Roles
	}{
		{"metadata", wire.RoleMetadata},
		{"meta", wire.RoleMetadata},
		{"data", wire.RoleData},
		{"both", wire.RoleBoth},
		{"metadata,data", wire.RoleBoth},
		{"data,metadata", wire.RoleBoth},
		{" data , meta ", wire.RoleBoth},
		{"data,data", wire.RoleData},
		{"both,data", wire.RoleBoth},
	}
	for _, c := range cases {
		got, err := ParseRoles(c.in)
		if err != nil || got != c.want {
			t.Fatalf("ParseRoles(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "gpu", "Metadata", "data,", ",data", "data;metadata", "roles(3)", "metadata,gpu"} {
		got, err := ParseRoles(bad)
		if !errors.Is(err, pdc.ErrInvalid) || got != 0 {
			t.Fatalf("ParseRoles(%q) = %v, %v; want 0 and pdc.ErrInvalid", bad, got, err)
		}
		if !strings.Contains(err.Error(), "want metadata, data or both") {
			t.Fatalf("ParseRoles(%q): error %q does not list the roles", bad, err)
		}
	}
}

func TestRoleString(t *testing.T) {
	cases := map[Roles]string{
		wire.RoleMetadata: "metadata", wire.RoleData: "data", wire.RoleBoth: "both",
		0: "roles(0)", 4: "roles(4)", wire.RoleBoth | 8: "roles(11)",
	}
	for r, want := range cases {
		got := RoleString(r)
		if got != want {
			t.Fatalf("RoleString(%d) = %q, want %q", r, got, want)
		}
		back, err := ParseRoles(got)
		if r == wire.RoleMetadata || r == wire.RoleData || r == wire.RoleBoth {
			if err != nil || back != r {
				t.Fatalf("ParseRoles(RoleString(%d)) = %v, %v", r, back, err)
			}
		} else if err == nil {
			t.Fatalf("ParseRoles(%q) accepted a role set it cannot name: %v", got, back)
		}
	}
}

func TestServerInfoRoundTrip(t *testing.T) {
	for _, s := range testList(3).Servers {
		got := ServerFromInfo(s.Info())
		if !got.Start.Equal(s.Start) {
			t.Fatalf("start %v came back as %v", s.Start, got.Start)
		}
		got.Start, s.Start = time.Time{}, time.Time{}
		if got != s {
			t.Fatalf("got %+v, want %+v", got, s)
		}
	}
}

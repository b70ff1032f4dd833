package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
)

func TestFrameFileFormat(t *testing.T) {
	body := []byte("hello\n")
	sum := crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli))
	want := fmt.Sprintf("pdc-test v3 crc32c=%08x len=6\nhello\n", sum)
	if got := string(frameFile("pdc-test", 3, body)); got != want {
		t.Fatalf("frameFile = %q, want %q", got, want)
	}
	if got := string(frameFile("m", 1, nil)); got != "m v1 crc32c=00000000 len=0\n" {
		t.Fatalf("frameFile of an empty body = %q", got)
	}
}

func TestFrameFileRoundTrip(t *testing.T) {
	bodies := [][]byte{
		nil,
		[]byte("x"),
		[]byte("{\"size\": 1}\n"),
		[]byte("line one\nline two\n\n"),
		[]byte("pdc-server-list v1 crc32c=00000000 len=0\n"), // a body that looks like a header
		bytes.Repeat([]byte{0, 0xff, '\n'}, 10000),
	}
	for _, body := range bodies {
		for _, fm := range []struct {
			magic   string
			version int
		}{{listMagic, listVersion}, {rank0Magic, rank0Version}, {"m", 0}, {"m", -2}, {"m", 1 << 40}} {
			got, err := unframeFile("f", fm.magic, fm.version, frameFile(fm.magic, fm.version, body))
			if err != nil {
				t.Fatalf("%s v%d, body %q: %v", fm.magic, fm.version, body, err)
			}
			if !bytes.Equal(got, body) {
				t.Fatalf("%s v%d: got body %q, want %q", fm.magic, fm.version, got, body)
			}
		}
	}
}

func TestUnframeFileRejects(t *testing.T) {
	body := []byte(`{"addr":"127.0.0.1:4000"}` + "\n")
	good := frameFile(listMagic, listVersion, body)
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	nl := bytes.IndexByte(good, '\n')
	crcAt := bytes.Index(good, []byte("crc32c=")) + len("crc32c=")
	otherHex := func(c byte) byte {
		if c == '0' {
			return '1'
		}
		return '0'
	}
	cases := []struct {
		name string
		data []byte
		want error
		msg  string
	}{
		{"empty", nil, pdc.ErrProtocol, "no header line"},
		{"torn header", good[:nl], pdc.ErrProtocol, "no header line"},
		{"garbage", []byte("garbage\n"), pdc.ErrProtocol, "bad header"},
		{"blank line", []byte("\n"), pdc.ErrProtocol, "bad header"},
		{"json without header", []byte("{\"size\": 1}\n"), pdc.ErrProtocol, "bad header"},
		{"bad crc digits", []byte(listMagic + " v1 crc32c=zz len=0\n"), pdc.ErrProtocol, "bad header"},
		{"no len", []byte(listMagic + " v1 crc32c=00000000\n"), pdc.ErrProtocol, "bad header"},
		{"wrong magic", frameFile(rank0Magic, listVersion, body), pdc.ErrProtocol, `is a "pdc-rank0" file, want "pdc-server-list"`},
		{"magic prefix", frameFile("pdc-server-lis", listVersion, body), pdc.ErrProtocol, "want \"pdc-server-list\""},
		{"newer version", frameFile(listMagic, listVersion+1, body), pdc.ErrVersion, "format version 2, this build reads version 1"},
		{"version 0", frameFile(listMagic, 0, body), pdc.ErrVersion, "format version 0"},
		{"truncated body", good[:len(good)-1], pdc.ErrChecksum, "body is 25 bytes, header says 26"},
		{"body cut at header", good[:nl+1], pdc.ErrChecksum, "body is 0 bytes"},
		{"extra byte", append(bytes.Clone(good), 'x'), pdc.ErrChecksum, "body is 27 bytes"},
		{"edited body", edit(func(b []byte) []byte { b[len(b)-5] = '1'; return b }), pdc.ErrChecksum, "checksum"},
		{"swapped bytes", edit(func(b []byte) []byte { b[nl+2], b[nl+3] = b[nl+3], b[nl+2]; return b }), pdc.ErrChecksum, "checksum"},
		{"edited crc", edit(func(b []byte) []byte { b[crcAt] = otherHex(b[crcAt]); return b }), pdc.ErrChecksum, "checksum"},
		{"negative len", []byte(listMagic + " v1 crc32c=00000000 len=-1\n"), pdc.ErrChecksum, "header says -1"},
	}
	for _, c := range cases {
		got, err := unframeFile("/tmp/x/pdc_server_list", listMagic, listVersion, c.data)
		if err == nil {
			t.Fatalf("%s: unframed %q as %q", c.name, c.data, got)
		}
		if !errors.Is(err, c.want) {
			t.Fatalf("%s: error %q, want %v", c.name, err, c.want)
		}
		if c.want != pdc.ErrProtocol && errors.Is(err, pdc.ErrProtocol) {
			t.Fatalf("%s: error %q also wraps pdc.ErrProtocol", c.name, err)
		}
		if !strings.Contains(err.Error(), c.msg) || !strings.HasPrefix(err.Error(), "/tmp/x/pdc_server_list: ") {
			t.Fatalf("%s: error %q does not start with the path or lacks %q", c.name, err, c.msg)
		}
		if got != nil {
			t.Fatalf("%s: error with body %q", c.name, got)
		}
	}
}

// FuzzUnframeFile: unframing never panics and fails only with the format
// errors; a file framed with any magic and version unframes, when it
// unframes at all, to the body it was framed with, and always does for
// the magics this package uses.
func FuzzUnframeFile(f *testing.F) {
	body := []byte(`{"addr":"127.0.0.1:4000"}` + "\n")
	good := frameFile(listMagic, listVersion, body)
	f.Add(good, body, listMagic, listVersion)
	f.Add(good[:len(good)-1], []byte(nil), rank0Magic, rank0Version)
	f.Add(frameFile(listMagic, 2, body), []byte("\n\n"), "m", 0)
	f.Add([]byte("garbage\n"), []byte("x"), "has space", -1)
	f.Add([]byte(listMagic+" v1 crc32c=00000000 len=-1\n"), []byte{0xff}, "", 1<<40)
	f.Add([]byte(nil), []byte(nil), "ünïcode", 7)
	f.Fuzz(func(t *testing.T, data, body []byte, magic string, version int) {
		if got, err := unframeFile("p", listMagic, listVersion, data); err != nil {
			if !errors.Is(err, pdc.ErrProtocol) && !errors.Is(err, pdc.ErrVersion) && !errors.Is(err, pdc.ErrChecksum) {
				t.Fatalf("unframe %q: unexpected error %v", data, err)
			}
		} else if !bytes.HasSuffix(data, got) {
			t.Fatalf("unframe %q returned %q, not the file's tail", data, got)
		}

		for _, fm := range []struct {
			magic   string
			version int
		}{{listMagic, listVersion}, {rank0Magic, rank0Version}, {listMagic, version}} {
			got, err := unframeFile("p", fm.magic, fm.version, frameFile(fm.magic, fm.version, body))
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("%s v%d, body %q: got %q, %v", fm.magic, fm.version, body, got, err)
			}
		}
		got, err := unframeFile("p", magic, version, frameFile(magic, version, body))
		if err == nil && !bytes.Equal(got, body) {
			t.Fatalf("magic %q v%d, body %q: got %q", magic, version, body, got)
		}
		// A plain token magic always works.
		if magic != "" && !strings.ContainsFunc(magic, func(r rune) bool { return r <= ' ' || r == 0x85 || r == 0xa0 || r >= 0x1680 }) && err != nil {
			t.Fatalf("magic %q v%d: %v", magic, version, err)
		}
	})
}

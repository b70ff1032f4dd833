package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
)

// formatErr reports whether err is one of the errors a reader of a cluster
// file may return for bad bytes.
func formatErr(err error) bool {
	for _, e := range []error{pdc.ErrProtocol, pdc.ErrVersion, pdc.ErrChecksum, pdc.ErrInvalid} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// FuzzParseList: a server list file of any bytes decodes to a valid list or
// fails with a format error naming the file; a list that decodes writes
// back to a file that decodes to the same list.
func FuzzParseList(f *testing.F) {
	for _, n := range []int{1, 3} {
		body, err := json.MarshalIndent(testList(n), "", "  ")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(frameFile(listMagic, listVersion, append(body, '\n')), false)
		f.Add(append(body, '\n'), true)
	}
	f.Add([]byte(`{"size":2,"servers":[{"rank":0,"addr":"a","roles":"both"}]}`), true)
	f.Add([]byte(`{"size":1,"servers":[{"rank":0,"addr":"a","roles":"data,,meta"}]}`), true)
	f.Add([]byte(`{"size":-1}`), true)
	f.Add([]byte(listMagic+" v1 crc32c=00000000 len=99999999999999999999\n"), false)
	f.Fuzz(func(t *testing.T, in []byte, frame bool) {
		data := in
		if frame {
			// The fuzzer cannot find the CRC; frame the body for it.
			data = frameFile(listMagic, listVersion, in)
		}
		l, err := parseList("/tmp/x/pdc_server_list", data)
		if err != nil {
			if !formatErr(err) || !strings.HasPrefix(err.Error(), "/tmp/x/pdc_server_list: ") {
				t.Fatalf("error %q is not a format error naming the file", err)
			}
			return
		}
		if err := l.Validate(); err != nil {
			t.Fatalf("decoded an invalid list: %v", err)
		}
		body, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		l2, err := parseList("p", frameFile(listMagic, listVersion, body))
		if err != nil || !sameList(l, l2) {
			t.Fatalf("list %+v re-encodes to one that decodes to %+v, %v", l, l2, err)
		}
	})
}

// FuzzParseRendezvous: a rendezvous record of any bytes decodes or fails
// with a format error; what decodes re-encodes to the same record.
func FuzzParseRendezvous(f *testing.F) {
	body, _ := json.Marshal(Rendezvous{Addr: "127.0.0.1:4000", Instance: "i", Size: 4, PID: 9})
	f.Add(frameFile(rank0Magic, rank0Version, append(body, '\n')), false)
	f.Add(body, true)
	f.Add([]byte(`{"size":"x"}`), true)
	f.Add([]byte(rank0Magic+" v1\n"), false)
	f.Fuzz(func(t *testing.T, in []byte, frame bool) {
		data := in
		if frame {
			data = frameFile(rank0Magic, rank0Version, in)
		}
		r, err := parseRendezvous("p", data)
		if err != nil {
			if !formatErr(err) {
				t.Fatalf("error %q is not a format error", err)
			}
			return
		}
		body, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if r2, err := parseRendezvous("p", frameFile(rank0Magic, rank0Version, body)); err != nil || r2 != r {
			t.Fatalf("record %+v re-encodes to one that decodes to %+v, %v", r, r2, err)
		}
	})
}

// FuzzParseSecret: a secret file of any bytes gives a secret of at least
// 16 bytes with no surrounding space, taken from the file, or
// pdc.ErrInvalid naming the file.
func FuzzParseSecret(f *testing.F) {
	f.Add([]byte(strings.Repeat("ab", 32) + "\n"))
	f.Add([]byte("short\n"))
	f.Add([]byte("\t" + strings.Repeat("y", 16) + "\r\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parseSecret("/run/pdc_secret", data)
		if err != nil {
			if !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), "/run/pdc_secret") {
				t.Fatalf("error %q: want pdc.ErrInvalid naming the file", err)
			}
			return
		}
		if len(s) < 16 || !bytes.Contains(data, s) || !bytes.Equal(bytes.TrimSpace(s), s) {
			t.Fatalf("file %q gave secret %q", data, s)
		}
	})
}

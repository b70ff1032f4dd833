package cluster

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
)

func TestNewSecret(t *testing.T) {
	dir := t.TempDir()
	s1, err := NewSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s1) != 64 {
		t.Fatalf("secret is %d bytes, want 64 hex digits", len(s1))
	}
	if _, err := hex.DecodeString(string(s1)); err != nil {
		t.Fatalf("secret %q is not hex: %v", s1, err)
	}
	path := filepath.Join(dir, SecretFile)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode() != 0o600 {
		t.Fatalf("secret file mode %v, want -rw-------", st.Mode())
	}
	if names := dirNames(t, dir); !reflect.DeepEqual(names, []string{SecretFile}) {
		t.Fatalf("dir holds %q, want only %s", names, SecretFile)
	}
	for _, read := range []func() ([]byte, error){
		func() ([]byte, error) { return ReadSecret(path) },
		func() ([]byte, error) { return SecretIn(dir) },
	} {
		got, err := read()
		if err != nil || !bytes.Equal(got, s1) {
			t.Fatalf("read back %q, %v; want %q", got, err, s1)
		}
	}
	// A new secret replaces the old one.
	s2, err := NewSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(s1, s2) {
		t.Fatal("two secrets are equal")
	}
	if got, err := SecretIn(dir); err != nil || !bytes.Equal(got, s2) {
		t.Fatalf("after replacing: %q, %v; want %q", got, err, s2)
	}
}

func writeSecret(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), SecretFile)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadSecretRefusesReadableFile(t *testing.T) {
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660, 0o666, 0o700 | 0o007, 0o601} {
		path := writeSecret(t, strings.Repeat("s", 32), mode)
		got, err := ReadSecret(path)
		if !errors.Is(err, pdc.ErrPermission) {
			t.Fatalf("mode %04o: got %q, %v; want pdc.ErrPermission", mode, got, err)
		}
		if !strings.Contains(err.Error(), "chmod 600 "+path) {
			t.Fatalf("mode %04o: error %q does not say chmod 600 %s", mode, err, path)
		}
		// SecretIn passes the refusal on rather than ignoring the secret.
		if _, err := SecretIn(filepath.Dir(path)); !errors.Is(err, pdc.ErrPermission) {
			t.Fatalf("mode %04o: SecretIn: %v", mode, err)
		}
	}
	for _, mode := range []os.FileMode{0o600, 0o400, 0o700} {
		path := writeSecret(t, strings.Repeat("s", 32), mode)
		if _, err := ReadSecret(path); err != nil {
			t.Fatalf("mode %04o: %v", mode, err)
		}
	}
}

func TestReadSecretLength(t *testing.T) {
	cases := []struct {
		content string
		want    string // "" for an error
	}{
		{"", ""},
		{"\n", ""},
		{"short\n", ""},
		{strings.Repeat("x", 15), ""},
		{"  " + strings.Repeat("x", 15) + "  \n\n", ""},
		{strings.Repeat("x", 16), strings.Repeat("x", 16)},
		{"\t" + strings.Repeat("y", 16) + "\r\n", strings.Repeat("y", 16)},
		{strings.Repeat("z", 64) + "\n", strings.Repeat("z", 64)},
	}
	for _, c := range cases {
		path := writeSecret(t, c.content, 0o600)
		got, err := ReadSecret(path)
		if c.want == "" {
			if !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), "at least 16") || !strings.Contains(err.Error(), path) {
				t.Fatalf("secret %q: got %q, %v; want pdc.ErrInvalid", c.content, got, err)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Fatalf("secret %q: got %q, %v; want %q", c.content, got, err, c.want)
		}
	}
}

func TestSecretMissing(t *testing.T) {
	dir := t.TempDir()
	s, err := SecretIn(dir)
	if s != nil || err != nil {
		t.Fatalf("SecretIn(empty dir) = %q, %v; want nil, nil", s, err)
	}
	if _, err := ReadSecret(filepath.Join(dir, SecretFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadSecret(missing) = %v, want fs.ErrNotExist", err)
	}
}

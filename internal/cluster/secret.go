package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/atomicfile"
)

// NewSecret writes a fresh random secret to dir/SecretFile, mode 0600, and
// returns it.
func NewSecret(dir string) ([]byte, error) {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	secret := []byte(hex.EncodeToString(raw))
	if err := atomicfile.Write(filepath.Join(dir, SecretFile), append(secret, '\n'), 0o600); err != nil {
		return nil, err
	}
	return secret, nil
}

// ReadSecret reads a secret file. It refuses a file that others can read,
// since anyone who reads it can act as a client. Missing: fs.ErrNotExist.
func ReadSecret(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("secret file %s has mode %04o: others can read it; run chmod 600 %s: %w",
			path, st.Mode().Perm(), path, pdc.ErrPermission)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseSecret(path, data)
}

// parseSecret returns the secret a secret file's bytes hold.
func parseSecret(path string, data []byte) ([]byte, error) {
	secret := []byte(strings.TrimSpace(string(data)))
	if len(secret) < 16 {
		return nil, fmt.Errorf("secret file %s holds %d bytes; a secret needs at least 16: %w", path, len(secret), pdc.ErrInvalid)
	}
	return secret, nil
}

// SecretIn reads dir/SecretFile if it exists; nil, nil when it does not.
func SecretIn(dir string) ([]byte, error) {
	s, err := ReadSecret(filepath.Join(dir, SecretFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return s, err
}

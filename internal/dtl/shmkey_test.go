package dtl_test

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/pdcgo/pdc/internal/dtl"
)

// A key is any bytes, and every staging key holds a NUL (after its path):
// shm named its memory file after the key, and memfd_create refuses a name
// with a NUL, so a buffer sent by shm, or a file viewed by shm, failed.
func TestShmKeyWithNUL(t *testing.T) {
	payload := bytes.Repeat([]byte{7}, 200<<10)
	f, err := os.CreateTemp(t.TempDir(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(payload); err != nil {
		t.Fatal(err)
	}
	addr, secret := inproc(t, func(ctx context.Context, key []byte) (dtl.Source, error) {
		if bytes.HasPrefix(key, []byte("file")) {
			return dtl.FileSection(f, 0, int64(len(payload))), nil
		}
		return dtl.Bytes(payload), nil
	})
	r := recv(t, secret, dtl.ModeShm)
	buf := make([]byte, len(payload))
	if n, err := r.Fetch(context.Background(), addr, []byte("buf\x00\x01"), dtl.IntoBuffer(buf)); err != nil || !bytes.Equal(buf[:n], payload) {
		t.Errorf("fetch of a buffer under a key with a NUL: %d bytes, %v", n, err)
	}
	v, err := r.FetchView(context.Background(), addr, []byte("file\x00\x01"))
	if err != nil {
		t.Fatalf("view of a file under a key with a NUL: %v", err)
	}
	defer v.Close()
	if !bytes.Equal(v.Bytes(), payload) {
		t.Errorf("view of a file under a key with a NUL: wrong bytes")
	}
}

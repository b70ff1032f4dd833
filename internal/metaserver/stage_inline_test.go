package metaserver

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"log/slog"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/staging"
	"github.com/pdcgo/pdc/internal/wire"
)

func inlineRecord(path string, data []byte) wire.StageRecord {
	return wire.StageRecord{Path: path, Host: "node-a", Size: uint64(len(data)), CRC: crc32.Checksum(data, staging.Table),
		Format: wire.StageFormatInline, Data: data}
}

// A record carrying its small file keeps the bytes through a crash of the
// server (the log holds them) and gives them to lookups and waits, the
// bytes of the version they answer; the produce's answer leaves them out.
// Bytes that cannot be the file are refused.
func TestStageInlineRecords(t *testing.T) {
	dir, cp := t.TempDir(), t.TempDir()
	open := func() *Service {
		s, err := Open(Config{Dir: dir, CheckpointDir: cp, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		s.SetPlacement(0, 1)
		s.SetReady()
		return s
	}
	s := open()
	v1, v2 := []byte("first version"), []byte("second version, longer")
	for _, data := range [][]byte{v1, v2} {
		resp, err := s.stageProduce(context.Background(), stageReq(&wire.StageBatch{Records: []wire.StageRecord{inlineRecord("small", data)}}))
		if err != nil {
			t.Fatal(err)
		}
		var out wire.StageBatch
		if err := out.Unmarshal(resp.Header); err != nil {
			t.Fatal(err)
		}
		if len(out.Records) != 1 || len(out.Records[0].Data) != 0 {
			t.Fatalf("produce answered %+v; want the record without its bytes", out.Records)
		}
	}
	crash(s) // acknowledged: the log holds both produces
	s = open()
	defer s.Close()
	r, err := lookupOn(s, "small")
	if err != nil || r.Version != 2 || !r.Inline() || !bytes.Equal(r.Data, v2) {
		t.Fatalf("lookup after a crash: %+v, %v; want version 2 carrying %q", r, err, v2)
	}
	resp, err := s.stageWait(context.Background(), stageReq(&wire.StageKey{Path: "small", After: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Unmarshal(resp.Header); err != nil || r.Version != 2 || !bytes.Equal(r.Data, v2) {
		t.Fatalf("wait after version 1: %+v, %v; want version 2 carrying %q", r, err, v2)
	}

	bad := func(mod func(r *wire.StageRecord)) wire.StageRecord {
		r := inlineRecord("bad", []byte("abc"))
		mod(&r)
		return r
	}
	for _, tc := range []struct {
		name string
		rec  wire.StageRecord
		is   error
	}{
		{"bytes not matching the CRC", bad(func(r *wire.StageRecord) { r.Data = []byte("abd") }), pdc.ErrChecksum},
		{"fewer bytes than the file", bad(func(r *wire.StageRecord) { r.Size = 4 }), pdc.ErrInvalid},
		{"bytes in a record of the old format", bad(func(r *wire.StageRecord) { r.Format = 0 }), pdc.ErrInvalid},
		{"too many bytes", inlineRecord("bad", make([]byte, wire.StageInlineMax+1)), pdc.ErrTooLarge},
	} {
		_, err := s.stageProduce(context.Background(), stageReq(&wire.StageBatch{Records: []wire.StageRecord{tc.rec}}))
		if !errors.Is(err, tc.is) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.is)
		}
	}
	if _, err := lookupOn(s, "bad"); !errors.Is(err, pdc.ErrNotFound) {
		t.Errorf("a refused record was stored: %v", err)
	}
}

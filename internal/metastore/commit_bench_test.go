package metastore

import (
	"encoding/binary"
	"testing"
)

// BenchmarkCommit is one small change at a time, the cost of a create's
// commit without the RPC around it.
func BenchmarkCommit(b *testing.B) {
	s := openTest(b, b.TempDir(), DurabilityProcess)
	defer s.close()
	key := make([]byte, 24)
	val := make([]byte, 64)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		binary.BigEndian.PutUint64(key, uint64(i))
		bt := s.db.NewBatch()
		_ = bt.Set(key, val, nil)
		if err := s.commit(bt); err != nil {
			b.Fatal(err)
		}
		bt.Close()
	}
}

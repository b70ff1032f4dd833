package metaserver

import (
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/staging"
	"github.com/pdcgo/pdc/internal/wire"
)

// A new version of a path is produced later than the last, even when the
// last was stamped by a clock ahead of this server's (a record a resize
// moved here from another server, or this server's clock stepped back):
// consumers tell a newer copy by a higher version produced later
// (staging.LaterProduce), and one that looked up the older version must
// not take the newer copy for older and put its bytes over it.
func TestStageProducedLaterThanTheLastVersion(t *testing.T) {
	s := newSvc(t)
	defer s.Close()
	ahead := wire.StageRecord{Path: "p", Host: "node-a", Size: 3, CRC: 7, Version: 4,
		Produced: time.Now().Add(time.Hour).UnixNano()}
	b := s.st.NewBatch()
	b.Set(keyStage("", "p"), ahead.Marshal(nil))
	wait, err := s.st.CommitApply(b)
	if err == nil {
		err = wait()
	}
	b.Close()
	if err != nil {
		t.Fatal(err)
	}
	got := produceOn(t, s, "p", "p")
	for i, r := range got {
		if r.Version != uint64(5+i) {
			t.Fatalf("produce %d: version %d, want %d", i, r.Version, 5+i)
		}
	}
	if !staging.LaterProduce(&got[0], &ahead) || !staging.LaterProduce(&got[1], &got[0]) {
		t.Fatalf("version 4 produced at %d, then 5 at %d and 6 at %d: not each later than the last",
			ahead.Produced, got[0].Produced, got[1].Produced)
	}
}

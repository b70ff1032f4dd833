package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pdcgo/pdc/client"
)

func TestCount(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{count(0, "object", "objects"), "0 objects"},
		{count(1, "object", "objects"), "1 object"},
		{count(2, "object", "objects"), "2 objects"},
		{count(uint64(1), "corrupt block", "corrupt blocks"), "1 corrupt block"},
		{count(int64(1), "byte", "bytes"), "1 byte"},
		{allAnswer(1), "its 1 server answers"},
		{allAnswer(3), "all 3 servers answer"},
		{noneAnswers(1), "its 1 server does not answer"},
		{noneAnswers(2), "none of its 2 servers answers"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}

// pdc fsck's line of a data server says one object and one block in
// the singular: it said "1 objects, ...; 0 orphaned, 1 corrupt blocks,
// 1 blocks checked".
func TestFsckLineSaysOneInTheSingular(t *testing.T) {
	var b bytes.Buffer
	printScrub(&b, client.ScrubReport{Objects: 1, Bytes: 4096, NCorrupt: 1, Verified: 1}, true)
	line, _, _ := strings.Cut(b.String(), "\n")
	for _, want := range []string{": 1 object, ", "1 corrupt block, ", "1 block checked"} {
		if !strings.Contains(line, want) {
			t.Errorf("fsck said %q; want %q in it", line, want)
		}
	}
}

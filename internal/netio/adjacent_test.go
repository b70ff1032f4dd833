package netio

import "testing"

func TestAppendAdjacent(t *testing.T) {
	buf := make([]byte, 100)
	other := make([]byte, 10)
	var bufs [][]byte
	bufs = AppendAdjacent(bufs, buf[0:10])
	bufs = AppendAdjacent(bufs, buf[10:30]) // continues
	bufs = AppendAdjacent(bufs, buf[40:50]) // a gap
	bufs = AppendAdjacent(bufs, other)      // elsewhere
	bufs = AppendAdjacent(bufs, buf[50:60]) // follows other, not buf[40:50]
	bufs = AppendAdjacent(bufs, buf[60:60]) // empty
	var lens []int
	for _, b := range bufs {
		lens = append(lens, len(b))
	}
	if len(bufs) != 5 || len(bufs[0]) != 30 || &bufs[0][0] != &buf[0] || len(bufs[1]) != 10 || &bufs[3][0] != &buf[50] {
		t.Fatalf("got %d buffers of lengths %v", len(bufs), lens)
	}
}

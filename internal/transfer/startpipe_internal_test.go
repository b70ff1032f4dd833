package transfer

import "testing"

func TestStartQueueBefore(t *testing.T) {
	var q startQueue
	w := func(server, bytes int) *startCall {
		sc := &startCall{server: server, bytes: bytes, writes: bytes > 0}
		q.add(sc)
		return sc
	}
	w1, r1, w2 := w(0, 1<<20), w(0, 0), w(0, 2<<20)
	other := w(1, 1<<20)

	if got := q.before(0, 1<<20, false); len(got) != 0 {
		t.Fatalf("a write within the window waits for %d starts, want none", len(got))
	}
	got := q.before(0, 0, true)
	if len(got) != 2 || got[0] != w1 || got[1] != w2 {
		t.Fatalf("a read waits for %v, want the two writes to its server", got)
	}
	// Over the bytes: the oldest go until the new one fits (3 MiB are
	// out; the new one fits once w2's 2 MiB are in).
	got = q.before(0, startWindowBytes-1<<20, false)
	if len(got) != 3 || got[0] != w1 || got[1] != r1 || got[2] != w2 {
		t.Fatalf("over the byte window: waits for %d starts, want the three oldest", len(got))
	}
	// Over the count.
	for range startWindowCalls - 3 {
		w(0, 0)
	}
	if got := q.before(0, 0, false); len(got) != 1 || got[0] != w1 {
		t.Fatalf("over the call window: waits for %d starts, want the oldest", len(got))
	}
	q.remove(w1)
	if got := q.before(0, 0, false); len(got) != 0 {
		t.Fatalf("back within the window: waits for %d starts", len(got))
	}
	if got := q.before(1, 0, true); len(got) != 1 || got[0] != other {
		t.Fatal("a read on another server waits for that server's writes only")
	}
}

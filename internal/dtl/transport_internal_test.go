package dtl

import (
	"context"
	"errors"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Each mode has a transport per direction, and a half of the other
// direction is refused (DYAD_RC_BAD_COMM_MODE).
func TestTransportDirections(t *testing.T) {
	s, err := NewSender(SenderConfig{Resolve: func(context.Context, []byte) (Source, error) { return Bytes(nil), nil }, ShmDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := NewReceiver(ReceiverConfig{Mode: ModeStream})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, m := range Modes {
		st, rt := s.transports[m], r.transports[m]
		if st.Mode() != m || st.Direction() != DirSend || rt.Mode() != m || rt.Direction() != DirRecv {
			t.Fatalf("%s: transports %s/%s and %s/%s", m, st.Mode(), st.Direction(), rt.Mode(), rt.Direction())
		}
		if _, err := st.Prepare(context.Background(), Peer{}, &wire.FetchRequest{}, IntoBuffer(make([]byte, 1))); !errors.Is(err, ErrBadMode) || !errors.Is(err, pdc.ErrInvalid) {
			t.Errorf("%s: a sending transport prepared a receive: %v", m, err)
		}
		if _, err := st.Receive(context.Background(), &Transfer{}, &wire.FetchReply{}); !errors.Is(err, ErrBadMode) {
			t.Errorf("%s: a sending transport received: %v", m, err)
		}
		if err := rt.Send(context.Background(), nil, &wire.FetchRequest{}, Bytes(nil), &wire.FetchReply{}); !errors.Is(err, ErrBadMode) {
			t.Errorf("%s: a receiving transport sent: %v", m, err)
		}
	}
}

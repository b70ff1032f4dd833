package dtl

import (
	"context"
	"fmt"
	"io"

	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// stream sends chunks on the fetch's RPC connection.
type (
	streamSend struct{ s *Sender }
	streamRecv struct{ r *Receiver }
)

func (*streamSend) Mode() Mode { return ModeStream }
func (*streamRecv) Mode() Mode { return ModeStream }

func (t *streamSend) Send(ctx context.Context, call *rpc.Request, req *wire.FetchRequest, src Source, _ *wire.FetchReply) error {
	defer src.release()
	size := src.Size()
	chunk := int64(t.s.cfg.ChunkSize)
	for off := int64(0); off < size; off += chunk {
		n := min(chunk, size-off)
		var err error
		if src.File != nil {
			err = call.ChunkFile(ctx, nil, src.File, src.Off+off, n)
		} else {
			err = call.Chunk(ctx, nil, src.Buf[off:off+n])
		}
		if err != nil {
			return fmt.Errorf("stream: %w", err)
		}
	}
	return nil
}

func (t *streamRecv) Prepare(_ context.Context, _ Peer, _ *wire.FetchRequest, sink Sink) (*Transfer, error) {
	w := &sinkWriter{s: sink}
	return &Transfer{sink: sink, state: w, chunk: func(_ []byte, rd io.Reader, n uint64) error {
		return w.readFrom(rd, int64(n))
	}}, nil
}

func (t *streamRecv) Receive(_ context.Context, tr *Transfer, rep *wire.FetchReply) (int64, error) {
	w := tr.state.(*sinkWriter)
	if uint64(w.n) != rep.Size {
		return w.n, fmt.Errorf("stream ended after %d of %d bytes: %w", w.n, rep.Size, ErrBadPack)
	}
	return w.n, nil
}

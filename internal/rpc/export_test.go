package rpc

import "github.com/pdcgo/pdc/internal/wire"

// lastHeaderLen returns the header length of the frame last read by next.
func (r *frameReader) lastHeaderLen() uint32 {
	f, _ := wire.DecodeFrame(r.prefix[:])
	return f.HeaderLen
}

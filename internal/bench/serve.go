package bench

import (
	"context"

	"github.com/pdcgo/pdc/internal/rpc"
)

// PingHandler echoes the request payload, like a pdc server's ping.
func PingHandler(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	return &rpc.Response{Payload: [][]byte{req.Payload}}, nil
}

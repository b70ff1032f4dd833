package client

import (
	"fmt"
	"os"

	"github.com/pdcgo/pdc/internal/dtl"
)

// WithRegionTransport picks how region payloads travel between this
// client and the data servers: "stream" on the RPC connection, "shm"
// through shared memory (data servers on this host only: a transfer to a
// server on another host fails), or "auto" (shm to servers on this host
// once this client has moved 256 MiB to or from one, which pays for the
// lane's fresh memory; stream before that and to other hosts). "pull"
// and "push" are staging modes and mean stream here. Default: $PDC_DTL,
// else auto. An unknown name fails Connect.
func WithRegionTransport(mode string) Option {
	return func(o *options) { o.regionMode, o.regionModeSet = mode, true }
}

// WithLaneSize sets the bytes of each shared-memory lane (default 128
// MiB); the pages are the kernel's only once touched.
func WithLaneSize(n int) Option { return func(o *options) { o.laneSize = n } }

// regionMode resolves the region transport option.
func regionMode(o *options) (dtl.Mode, error) {
	name := o.regionMode
	if !o.regionModeSet {
		name = defaultRegionMode()
	}
	m, err := dtl.ParseMode(name)
	if err != nil {
		return 0, fmt.Errorf("region transport: %w", err)
	}
	switch m {
	case dtl.ModePull, dtl.ModePush:
		m = dtl.ModeStream
	}
	return m, nil
}

// defaultRegionMode is $PDC_DTL, else auto: measured with 1 GiB objects
// on one host, lanes moved regions of 64 KiB to 16 MiB 1.1 to 2 times as
// fast as loopback TCP (docs/design/0006-region-io.md).
func defaultRegionMode() string {
	if s := os.Getenv(dtl.EnvMode); s != "" {
		return s
	}
	return "auto"
}

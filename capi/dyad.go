package capi

import (
	"fmt"
	"strings"
)

// DYAD's environment variables, read as aliases of ours: where ours is set
// it wins, so a job script that sets both gets one meaning.
const (
	EnvDyadProducer     = "DYAD_PATH_PRODUCER"
	EnvDyadConsumer     = "DYAD_PATH_CONSUMER"
	EnvDyadShared       = "DYAD_SHARED_STORAGE"
	EnvDyadDTLMode      = "DYAD_DTL_MODE"
	EnvDyadKVSNamespace = "DYAD_KVS_NAMESPACE"
	EnvDyadFsyncWrite   = "DYAD_FSYNC_WRITE"
	EnvDyadAsyncPublish = "DYAD_ASYNC_PUBLISH"
)

// envOr is $name, else $alias.
func (l *Lib) envOr(name, alias string) string {
	if v := l.cfg.Getenv(name); v != "" {
		return v
	}
	return l.cfg.Getenv(alias)
}

// dtlMode is the transport $PDC_DTL names, else the one DYAD's
// $DYAD_DTL_MODE maps to: DYAD's FLUX_RPC streams the file in the reply to
// one request, as our stream does; its UCX and MARGO have the consumer pull
// from memory the producer exposes, as our pull does. Any other value is
// passed on, so our own mode names work there too and a wrong one fails
// the consume naming the valid ones.
func (l *Lib) dtlMode() string {
	if m := l.cfg.Getenv(EnvDTL); m != "" {
		return m
	}
	m := l.cfg.Getenv(EnvDyadDTLMode)
	switch strings.ToUpper(m) {
	case "FLUX_RPC":
		return "stream"
	case "UCX", "MARGO":
		return "pull"
	}
	return strings.ToLower(m)
}

// StageLookup is dyad_get_metadata: the record of a produced file, its
// path relative to the managed dirs and its owner's rank. With wait, a
// file not produced yet is waited for, up to the connection's timeout.
func (l *Lib) StageLookup(pdcID uint64, path string, wait bool) (rel string, owner int, rc int) {
	rc = l.run(fmt.Sprintf("dyad_get_metadata(pdc %d, %q, wait %t)", pdcID, path, wait), func() error {
		if path == "" {
			return errNoPath
		}
		h, err := l.get(pdcID, kindConn)
		if err != nil {
			return err
		}
		ctx, cancel := h.conn.ctx()
		defer cancel()
		lookup := h.conn.c.Lookup
		if wait {
			lookup = h.conn.c.WaitProduced
		}
		f, err := lookup(ctx, path)
		if err != nil {
			return err
		}
		rel, owner = f.Path, f.Owner.Rank
		return nil
	})
	return rel, owner, rc
}

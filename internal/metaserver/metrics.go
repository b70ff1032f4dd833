package metaserver

import "github.com/pdcgo/pdc/internal/metastore"

// Metrics are a metadata service's figures for monitoring, read from
// what it keeps in memory.
type Metrics struct {
	Store metastore.StoreMetrics
	// OutboxBacklog is the bytes of tag index changes committed and not
	// yet tried at the servers that index them (DART's outbox).
	OutboxBacklog int
	// OutboxQueued is, by metadata server index, the bytes of tag index
	// changes waiting to be delivered there, tried or not; OutboxFailing
	// the servers whose last delivery failed.
	OutboxQueued  map[int]int
	OutboxFailing []int
	// Tombstones are deleted objects whose data some data server may
	// still hold.
	Tombstones int
	// DimsCuts are objects whose shrink or relayout some data server may
	// not have applied yet.
	DimsCuts int
	// StagedFiles and StagedBytes are the files produces recorded on
	// this server since it started, and their sizes.
	StagedFiles, StagedBytes uint64
}

// IndexFailing lists the metadata servers, by index, whose last delivery
// of tag index updates from this server failed.
func (s *Service) IndexFailing() []int { return s.ix.ob.Stats().Failing }

// Metrics returns the service's figures.
func (s *Service) Metrics() Metrics {
	ob := s.ix.ob.Stats()
	return Metrics{Store: s.st.Metrics(), OutboxBacklog: ob.Backlog, OutboxQueued: ob.Queued, OutboxFailing: ob.Failing,
		Tombstones: s.PendingTombstones(), DimsCuts: s.PendingCuts(),
		StagedFiles: s.producedFiles.Load(), StagedBytes: s.producedBytes.Load()}
}

package metastore

// StoreMetrics are a store's figures for monitoring: pebble's, read from
// its in-memory metrics (no I/O), and the log's.
type StoreMetrics struct {
	DiskBytes       uint64 // sstables, blobs and pebble's other files
	MemtableBytes   uint64
	L0Tables        int64
	Tables          int64 // over every level
	ReadAmp         int   // sublevels a read may look in
	Compactions     int64 // since open
	CompactionDebt  uint64
	Flushes         int64
	CacheHits       int64
	CacheMisses     int64
	CacheBytes      int64
	LogBytesWritten int64 // the store's own log, since open
	Gets            int64 // point lookups, since open
}

// Metrics returns the store's figures.
func (s *Store) Metrics() StoreMetrics {
	m := s.db.Metrics()
	return StoreMetrics{
		DiskBytes:       m.DiskSpaceUsage(),
		MemtableBytes:   m.MemTable.Size,
		L0Tables:        m.Levels[0].TablesCount,
		Tables:          m.Total().TablesCount,
		ReadAmp:         m.ReadAmp(),
		Compactions:     m.Compact.Count,
		CompactionDebt:  m.Compact.EstimatedDebt,
		Flushes:         m.Flush.Count,
		CacheHits:       m.BlockCache.Hits,
		CacheMisses:     m.BlockCache.Misses,
		CacheBytes:      m.BlockCache.Size,
		LogBytesWritten: s.log.written.Load(),
		Gets:            s.gets.Load(),
	}
}

package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"

	"github.com/pdcgo/pdc/internal/atomicfile"
	"github.com/pdcgo/pdc/internal/vfs"
)

// MetricsFilePrefix begins the names of the tmpdir's metrics records,
// one per server that serves metrics (--metrics-addr): MetricsFilePrefix
// and its rank. They sit beside the server list, so that whoever reads
// the list (pdc top) finds them.
const MetricsFilePrefix = "pdc_metrics."

const (
	metricsMagic   = "pdc-metrics"
	metricsVersion = 1
)

// MetricsAddr says where a server serves its metrics. Instance ties it
// to one run of the server: a record left by an earlier run is not
// the current server's.
type MetricsAddr struct {
	Rank     int    `json:"rank"`
	Instance string `json:"instance"`
	Addr     string `json:"addr"` // HOST:PORT of its HTTP listener
}

func metricsPath(dir string, rank int) string {
	return filepath.Join(dir, MetricsFilePrefix+strconv.Itoa(rank))
}

// WriteMetricsAddr records m atomically.
func (d Dir) WriteMetricsAddr(m MetricsAddr) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return atomicfile.WriteFS(vfs.OrDefault(d.FS), metricsPath(d.Path, m.Rank), frameFile(metricsMagic, metricsVersion, append(body, '\n')), 0o600)
}

// ReadMetricsAddr reads rank's record; fs.ErrNotExist if it has none.
func (d Dir) ReadMetricsAddr(rank int) (MetricsAddr, error) {
	path := metricsPath(d.Path, rank)
	data, err := vfs.ReadFile(vfs.OrDefault(d.FS), path)
	if err != nil {
		return MetricsAddr{}, err
	}
	body, err := unframeFile(path, metricsMagic, metricsVersion, data)
	if err != nil {
		return MetricsAddr{}, err
	}
	var m MetricsAddr
	if err := json.Unmarshal(body, &m); err != nil {
		return MetricsAddr{}, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// MetricsAddrs returns the metrics addresses of l's servers that
// recorded one in this run (their instance in l), by rank.
func (d Dir) MetricsAddrs(l *List) (map[int]string, error) {
	out := map[int]string{}
	for _, s := range l.Servers {
		m, err := d.ReadMetricsAddr(s.Rank)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m.Instance == s.Instance && m.Rank == s.Rank {
			out[s.Rank] = m.Addr
		}
	}
	return out, nil
}

// RemoveMetricsAddr removes rank's record, if any.
func (d Dir) RemoveMetricsAddr(rank int) error {
	err := vfs.OrDefault(d.FS).Remove(metricsPath(d.Path, rank))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

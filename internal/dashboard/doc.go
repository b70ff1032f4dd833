// Package dashboard serves a cluster's web page: its servers, their load
// over the last minutes, objects and bytes per data server, transfers,
// staging and recent errors (pdc dashboard, pdc up --dashboard).
//
// It reads the cluster the way pdc top does: a metrics.ClusterSnapshot
// of every server's Prometheus endpoint every Config.Interval, turned
// into a metrics.ClusterView. The server keeps a ring of the last views
// (Config.History), so that a page opened now has the last minutes to
// plot, and a ring of the last error outcomes (method, code, server,
// time), taken from the differences of the request counters between two
// snapshots. The page and its script are embedded in the binary (no
// assets fetched at run time); the page polls two JSON endpoints:
//
//	GET /api/snapshot  the latest view (Snapshot)
//	GET /api/history   the ring of views, oldest first (History)
//
// It listens on loopback unless told otherwise; beyond loopback it
// requires the cluster secret, as the servers do: every request must
// carry a token derived from the secret (Token), which the address
// printed at start carries once and a cookie afterwards.
// docs/design/0030-dashboard.md has the decisions.
package dashboard

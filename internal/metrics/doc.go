// Package metrics is a pdc server's Prometheus metrics, and the client
// side that reads them back.
//
// A server has one Registry: the rpc server's requests are counted at
// its dispatch (Registry.Observer, an rpc.Observer), and everything else
// (budgets, stores, queues, connections, bytes per transport) is read at
// scrape time from counters the server keeps anyway (Registry.Source):
// nothing on the request path takes a lock or allocates. The Go runtime
// and process collectors come with it. Serve puts the registry on
// /metrics of an HTTP listener (--metrics-addr).
//
// The client side scrapes servers (Scrape), parses the text format and
// keeps what pdc top shows in a ClusterSnapshot; two snapshots make the
// rates (Rates). Other views of the cluster (a dashboard) use the same
// types.
//
// The names follow Prometheus conventions: a pdc_ prefix, units in the
// name (_seconds, _bytes), _total on counters, and labels with bounded
// values (method names from the wire table, wire codes, transports).
// docs/design/0026-metrics.md has the list.
package metrics

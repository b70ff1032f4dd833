package wire

import "time"

// Dims leases (docs/design/0006-region-io.md, "Dims leases"): how long a
// data server takes an object's dims version as current after asking
// the object's metadata server, and how long a metadata server waits,
// after committing a shrink or relayout that some data server did not
// apply, before it answers. Both sides of the protocol must agree on
// them: a data server acknowledges a write only within DimsLease of
// sending the question that confirmed its object's dims, measured on its
// own monotonic clock from before the question left; the metadata server
// answered that question before it committed the cut, so once
// DimsLeaseWait has passed since the commit, no data server acknowledges
// a write under the dims the cut replaced. The difference is a margin for
// the two clocks' rates and for the time between a write's registration,
// where the lease is checked, and its answer.
const (
	DimsLease     = 5 * time.Second
	DimsLeaseWait = DimsLease + time.Second
)

package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/staging"
	"github.com/pdcgo/pdc/internal/wire"
)

// Staging namespaces (docs/design/0008): each run of a workflow can stage
// its files in a namespace of its own, so that a re-run with the same file
// names waits for its own files instead of finding the last run's.

// EnvNamespace names the variable that gives the staging namespace
// (DYAD's DYAD_KVS_NAMESPACE) to clients not given one by WithNamespace.
const EnvNamespace = "PDC_STAGE_NAMESPACE"

// WithNamespace sets the staging namespace every produce, consume, lookup,
// listing and removal of this client works in (default
// $PDC_STAGE_NAMESPACE; "" is the default namespace, where files staged
// before namespaces are). A namespace is up to 128 letters, digits and
// ". _ - : + @".
func WithNamespace(ns string) Option {
	return func(o *options) { o.namespace, o.namespaceSet = ns, true }
}

// Namespace is the staging namespace the client works in.
func (c *Client) Namespace() string { return c.stage.namespace }

// WithNewerThan makes a consume wait for a version of the file newer than
// v, even if version v (or an older one) has been produced: a consumer
// that has version v waits for the next produce. 0, the default, takes
// any version. Versions count from 1 again after a path's record is
// removed (RemoveStaged).
func WithNewerThan(v uint64) ConsumeOption {
	return func(o *consumeOpts) { o.after = v }
}

func (c *Client) checkNamespace() error {
	return staging.CheckNamespace(c.stage.namespace)
}

// StagedCursor returns a cursor over the staged files of the client's
// namespace whose paths start with prefix ("" every one), in path order,
// a page per metadata server at a time (see Cursor).
func (c *Client) StagedCursor(prefix string) *Cursor[StagedFile] {
	cu := newCursor(func(a, b StagedFile) int { return strings.Compare(a.Path, b.Path) })
	prefix, err := staging.RecordPrefix(prefix, c.stage.consumerDir, c.stage.producerDir)
	if err == nil {
		err = c.checkNamespace()
	}
	if err != nil {
		cu.m.Fail(fmt.Errorf("list staged files: %w", err))
		return cu
	}
	cu.m.AddByName(c.metaServers(), c.label, c.pageLimit(), "list staged files", "stage_list", func(ctx context.Context, rank int, after string, limit uint32) ([]StagedFile, string, error) {
		q := wire.StageListReq{Version: wire.StageVersion, Namespace: c.stage.namespace, Prefix: prefix, After: after, Limit: limit}
		p, err := c.calls().StageList(ctx, rank, &q)
		if err != nil {
			return nil, "", err
		}
		out := make([]StagedFile, len(p.Records))
		for i := range p.Records {
			out[i] = c.staged(&p.Records[i])
		}
		return out, p.Next, nil
	})
	return cu
}

// AllStaged returns an iterator over the staged files of the client's
// namespace whose paths start with prefix, in path order (StagedCursor).
func (c *Client) AllStaged(ctx context.Context, prefix string) iter.Seq2[StagedFile, error] {
	return c.StagedCursor(prefix).All(ctx)
}

// RemoveStaged removes the record of one staged file of the client's
// namespace and reports how many went (0 or 1). The file itself stays in
// the producer dir. Consumers waiting for the path keep waiting for its
// next produce, which gets version 1.
//
// It removes the produce it finds at the call: the removal names it, so
// that when its answer is lost and the request is sent again (once, on a
// new connection), a produce of the path made in between stays.
func (c *Client) RemoveStaged(ctx context.Context, path string) (int, error) {
	rel, err := staging.RecordPath(path, c.stage.consumerDir, c.stage.producerDir)
	if err == nil {
		err = c.checkNamespace()
	}
	if err != nil {
		return 0, fmt.Errorf("remove %q: %w", path, err)
	}
	rank, err := c.stageMeta(rel)
	if err != nil {
		return 0, fmt.Errorf("remove %q: %w", rel, err)
	}
	r, err := c.calls().StageLookup(ctx, rank, &wire.StageKey{Path: rel, Namespace: c.stage.namespace, Version: wire.StageVersion})
	if errors.Is(err, pdc.ErrNotFound) {
		// Answered once the absence is durable, as a removal finding
		// nothing is.
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("remove %q: %w", rel, err)
	}
	q := wire.StageRemoveReq{Version: wire.StageVersion, Namespace: c.stage.namespace, Path: rel, Record: r.Version, Produced: r.Produced}
	got, err := c.calls().StageRemove(ctx, rank, &q)
	if errors.Is(err, pdc.ErrUnavailable) && ctx.Err() == nil {
		// The connection broke: the removal may have been made and its
		// answer lost. Sent again it removes the same produce or nothing.
		got, err = c.calls().StageRemove(ctx, rank, &q)
	}
	if err != nil {
		return 0, fmt.Errorf("remove %q: %w", rel, err)
	}
	return int(got.N), nil
}

// RemoveStagedPrefix removes the records of the staged files of the
// client's namespace whose paths start with prefix ("": every one of the
// namespace), a page at a time on every metadata server at once, and
// reports how many went. As RemoveStaged, it leaves the files alone; on an
// error, the count is of those removed before it.
//
// It removes the produces it lists: each page's removal names them, so
// that when its answer is lost and it is sent again (once, on a new
// connection), a produce under the prefix made in between stays.
func (c *Client) RemoveStagedPrefix(ctx context.Context, prefix string) (int, error) {
	given := prefix
	prefix, err := staging.RecordPrefix(given, c.stage.consumerDir, c.stage.producerDir)
	if err == nil {
		err = c.checkNamespace()
	}
	if err != nil {
		return 0, fmt.Errorf("remove %q: %w", given, err)
	}
	ranks := c.metaServers()
	var (
		mu    sync.Mutex
		total int
		wg    sync.WaitGroup
	)
	errs := make([]error, len(ranks))
	for i, rank := range ranks {
		wg.Go(func() {
			errs[i] = c.removeStagedOn(ctx, rank, prefix, func(n int) {
				mu.Lock()
				total += n
				mu.Unlock()
			})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// removeStagedOn removes the records under prefix held by metadata server
// rank, a listed page at a time, and counts what each removal took.
func (c *Client) removeStagedOn(ctx context.Context, rank int, prefix string, count func(int)) error {
	list := wire.StageListReq{Version: wire.StageVersion, Namespace: c.stage.namespace, Prefix: prefix, Limit: c.pageLimit()}
	for {
		page, err := c.calls().StageList(ctx, rank, &list)
		if err != nil {
			return fmt.Errorf("remove %q: %w", prefix, err)
		}
		if len(page.Records) > 0 {
			q := wire.StageRemoveReq{Version: wire.StageVersion, Namespace: c.stage.namespace, Prefix: prefix, All: prefix == "",
				Produces: wire.StageProduces(page.Records)}
			got, err := c.calls().StageRemove(ctx, rank, &q)
			if errors.Is(err, pdc.ErrUnavailable) && ctx.Err() == nil {
				// The connection broke: the removal may have been made
				// and its answer lost. Sent again it removes the same
				// produces or fewer.
				got, err = c.calls().StageRemove(ctx, rank, &q)
			}
			if err != nil {
				return fmt.Errorf("remove %q: %w", prefix, err)
			}
			count(int(got.N))
		}
		if page.Next == "" {
			return nil
		}
		if page.Next <= list.After {
			return fmt.Errorf("%s: stage_list: the page after %q ends at %q: %w", c.label(rank), list.After, page.Next, pdc.ErrProtocol)
		}
		list.After = page.Next
	}
}

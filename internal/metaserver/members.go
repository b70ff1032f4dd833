package metaserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/limits"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Container membership by reference (docs/design/0011).

// errList is the failures of several items, on one line: a server's
// message goes on one line of a C program's stderr.
type errList []error

func (l errList) Error() string {
	s := make([]string, len(l))
	for i, err := range l {
		s[i] = err.Error()
	}
	return strings.Join(s, "; ")
}

func (l errList) Unwrap() []error { return l }

// maxMemberErrors bounds the items a refused membership request names.
const maxMemberErrors = 3

// objMembers adds objects held here to a container as members by
// reference, or removes such memberships. It checks every item first and
// changes nothing if one fails: an object that does not exist (or is not
// held here), removing an object from its home container, or removing a
// membership that does not exist. Adding a member again changes nothing.
// The container is the client's to check: it is held by its own server.
func (s *objects) objMembers(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.Members
	if err := decode(req, &m); err != nil {
		return nil, err
	}
	if m.Version != wire.MembersVersion {
		return nil, fmt.Errorf("membership request of version %d; this server speaks version %d: %w", m.Version, wire.MembersVersion, pdc.ErrVersion)
	}
	if m.ContID == 0 {
		return nil, fmt.Errorf("membership request names no container: %w", pdc.ErrInvalid)
	}
	if len(m.ObjIDs) == 0 || len(m.ObjIDs) > limits.MaxBatchItems {
		return nil, fmt.Errorf("membership request for %d objects; want 1 to %d: %w", len(m.ObjIDs), limits.MaxBatchItems, pdc.ErrInvalid)
	}
	// A write lock would wait for tag writes; deletes take it, so no
	// object can go between its check and the commit.
	if err := s.lifeMu.RLock(ctx); err != nil {
		return nil, fmt.Errorf("container %d: memberships: %w", m.ContID, err)
	}
	defer s.lifeMu.RUnlock()
	change, err := s.membersToChange(&m)
	if err != nil {
		// An object not found, deleted perhaps by a delete still in its
		// fsync or whose sync failed.
		return nil, s.readDurably(ctx, func() string { return fmt.Sprintf("container %d: memberships", m.ContID) }, err, m.ObjIDs...)
	}
	out := wire.MembersReply{Version: wire.MembersVersion, Changed: uint64(len(change))}
	if m.Check || len(change) == 0 {
		// Answered without a commit, which would be durable only after
		// the creates of the objects: no object in its create's fsync is
		// said to be a member, or able to be one.
		for _, id := range m.ObjIDs {
			if err := s.creates.wait(ctx, id); err != nil {
				return nil, fmt.Errorf("container %d: wait for the create of object %d to be durable: %w", m.ContID, id, err)
			}
		}
	}
	if m.Check {
		// What it found may be a membership change whose sync failed.
		if err := s.readDurably(ctx, func() string { return fmt.Sprintf("container %d: check memberships", m.ContID) }, nil, append([]uint64{m.ContID}, m.ObjIDs...)...); err != nil {
			return nil, err
		}
		return rpc.Respond(&out), nil
	}
	if len(change) == 0 {
		// Changed perhaps by this request's first copy, still in its
		// fsync or whose sync failed.
		if err := s.readDurably(ctx, func() string { return fmt.Sprintf("container %d", m.ContID) }, nil, append([]uint64{m.ContID}, m.ObjIDs...)...); err != nil {
			return nil, err
		}
		return rpc.Respond(&out), nil
	}
	b := s.st.NewBatch()
	defer b.Close()
	for _, id := range change {
		if m.Remove {
			b.Delete(keyMember(m.ContID, id))
			b.Delete(keyAdded(id, m.ContID))
		} else {
			b.Set(keyMember(m.ContID, id), nil)
			b.Set(keyAdded(id, m.ContID), nil)
		}
	}
	tc := s.touches.begin(append([]uint64{m.ContID}, change...)...)
	defer s.touches.end(tc)
	if err := s.st.Commit(b); err != nil {
		return nil, fmt.Errorf("container %d: change %d memberships: %w", m.ContID, len(change), err)
	}
	return rpc.Respond(&out), nil
}

// membersToChange checks every item of m and returns the objects whose
// membership it changes, or the failures of the first few items that
// fail (the request then changes nothing). The caller holds lifeMu.
func (s *objects) membersToChange(m *wire.Members) ([]uint64, error) {
	var errs errList
	bad := 0
	fail := func(err error) {
		if bad++; bad <= maxMemberErrors {
			errs = append(errs, err)
		}
	}
	var change []uint64
	seen := make(map[uint64]struct{}, len(m.ObjIDs))
	for _, id := range m.ObjIDs {
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		if id == 0 {
			fail(fmt.Errorf("object id 0 names no object: %w", pdc.ErrInvalid))
			continue
		}
		o, _, err := s.loadObjByID(id)
		if err != nil {
			fail(err)
			continue
		}
		if o.ContID == m.ContID {
			if m.Remove {
				fail(fmt.Errorf("object %q (id %d) was created in container %d, its home, and cannot be removed from it: delete the object instead: %w",
					o.Name, id, m.ContID, pdc.ErrInvalid))
			}
			continue // a member already
		}
		_, member, err := s.st.Get(keyAdded(id, m.ContID))
		switch {
		case err != nil:
			fail(err)
		case m.Remove && !member:
			fail(fmt.Errorf("object %q (id %d) is not a member of container %d: %w", o.Name, id, m.ContID, pdc.ErrNotFound))
		case m.Remove == member:
			change = append(change, id)
		}
	}
	if bad > 0 {
		var err error = errs
		if bad > maxMemberErrors {
			err = fmt.Errorf("%w (and %d more)", err, bad-maxMemberErrors)
		}
		return nil, err
	}
	return change, nil
}

package metaserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// containers serves the container methods.
type containers struct {
	*core

	// createMu is held over the check and the commit of a container's
	// create, so that two creates of one name cannot both make it: the
	// second finds the first's. Containers are few, so one lock is enough.
	createMu sync.Mutex
}

func (s *core) loadCont(name string) (*wire.ContainerMeta, error) {
	v, ok, err := s.st.Get(keyCont(name))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("container %q: %w", name, pdc.ErrNotFound)
	}
	var m wire.ContainerMeta
	if err := m.Unmarshal(v); err != nil {
		return nil, fmt.Errorf("container %q: stored record: %w", name, err)
	}
	return &m, nil
}

func (s *core) resolveCont(k *wire.ContKey) (*wire.ContainerMeta, error) {
	if k.ID == 0 {
		if err := checkName("container", k.Name, MaxNameLen); err != nil {
			return nil, err
		}
		if err := s.owns(placement.Key(k.Name, 0), "container %q", k.Name); err != nil {
			return nil, err
		}
		return s.loadCont(k.Name)
	}
	if err := s.owns(placement.KeyOf(k.ID), "container %d", k.ID); err != nil {
		return nil, err
	}
	name, ok, err := s.st.Get(keyContID(k.ID))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("container %d: %w", k.ID, pdc.ErrNotFound)
	}
	return s.loadCont(string(name))
}

func (s *containers) contCreate(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var c wire.ContCreate
	if err := decode(req, &c); err != nil {
		return nil, err
	}
	if err := checkNewName("container", c.Name, MaxNameLen); err != nil {
		return nil, err
	}
	if c.Lifetime > 1 {
		return nil, fmt.Errorf("container %q: unknown lifetime %d (0 persistent, 1 transient): %w", c.Name, c.Lifetime, pdc.ErrInvalid)
	}
	key := placement.Key(c.Name, 0)
	if err := s.owns(key, "container %q", c.Name); err != nil {
		return nil, err
	}
	// Containers are few: one lock over check and commit is enough.
	s.createMu.Lock()
	defer s.createMu.Unlock()
	if m, err := s.loadCont(c.Name); err == nil {
		// The record found is answered as a get answers it: once what
		// made it is durable. It may be this client's own create, sent
		// again after its sync failed, or carry a mark of being deleted
		// or a lifetime whose commit is still in its fsync or whose sync
		// failed, which a power loss would take back.
		if err := s.readDurably(ctx, func() string { return fmt.Sprintf("create container %q", c.Name) }, nil, m.ID); err != nil {
			return nil, err
		}
		if m.Deleting {
			return nil, fmt.Errorf("container %q is being deleted; delete it again to finish (pdc cont rm %s), then create it: %w", c.Name, c.Name, pdc.ErrExists)
		}
		return rpc.Respond(&wire.ContReply{Meta: *m}), nil
	} else if !isNotFound(err) {
		return nil, err
	}
	// Gets wait for the commit (inFlight); a create of the same name
	// waits for createMu.
	f, err := s.creates.begin(s.st, 1)
	if err != nil {
		return nil, err
	}
	defer s.creates.end(f)
	m := wire.ContainerMeta{ID: placement.ID(key, f.first), Name: c.Name, Lifetime: c.Lifetime, CreatedUnix: time.Now().UnixNano()}
	b := s.st.NewBatch()
	defer b.Close()
	b.Set(keyCont(c.Name), m.Marshal(nil))
	b.Set(keyContID(m.ID), []byte(c.Name))
	if err := s.st.Commit(b); err != nil {
		return nil, fmt.Errorf("create container %q: %w", c.Name, err)
	}
	return rpc.Respond(&wire.ContReply{Meta: m, Created: true}), nil
}

func (s *containers) contGet(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var k wire.ContKey
	if err := decode(req, &k); err != nil {
		return nil, err
	}
	m, err := s.resolveCont(&k)
	if err != nil {
		// Deleted perhaps by a delete still in its fsync or whose sync
		// failed: the first step of that delete sent again by name
		// (DeleteContainer).
		subject := k.ID
		if subject == 0 {
			subject = nameSubject('c', k.Name, 0)
		}
		return nil, s.readDurably(ctx, func() string { return "container get" }, err, subject)
	}
	// A container whose create is in its fsync is not handed out: objects
	// created in it would outlive it if a power loss took it back.
	if err := s.creates.wait(ctx, m.ID); err != nil {
		return nil, fmt.Errorf("container %q: wait for its create to be durable: %w", m.Name, err)
	}
	// Nor one whose create's sync failed, until a commit made it durable,
	// nor a record that a change still in its fsync made (marked as being
	// deleted, a lifetime).
	if err := s.readDurably(ctx, func() string { return fmt.Sprintf("container %q", m.Name) }, nil, m.ID); err != nil {
		return nil, err
	}
	return rpc.Respond(m), nil
}

// serving reports ErrUnavailable until the service holds all its metadata.
func (s *core) serving() error {
	if !s.awaitReady() || s.count.Load() == 0 {
		return fmt.Errorf("metadata server is still starting: %w", pdc.ErrUnavailable)
	}
	return nil
}

func (s *containers) contList(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	if err := s.serving(); err != nil {
		return nil, err
	}
	// Clients that page use cont_page; this one answers older clients,
	// in one reply, as long as it stays within what they accept.
	var out wire.ContList
	size := 0
	err := s.scan([]byte{'C'}, func(_, v []byte) error {
		if size += len(v) + 8; size > legacyReplyBytes {
			return fmt.Errorf("this server holds more containers than one cont_list reply holds; list them with a client that pages (cont_page): %w", pdc.ErrTooLarge)
		}
		var m wire.ContainerMeta
		if err := m.Unmarshal(v); err != nil {
			return err
		}
		out.Items = append(out.Items, m)
		return ctx.Err()
	})
	if err != nil {
		return nil, err
	}
	// As cont_page: no container while its create is in its fsync, nor
	// what a change whose fsync failed made, until it is durable.
	for i := range out.Items {
		if err := s.creates.wait(ctx, out.Items[i].ID); err != nil {
			return nil, fmt.Errorf("list containers: %w", err)
		}
	}
	if err := s.scanDurably(ctx, func() string { return "list containers" }); err != nil {
		return nil, err
	}
	return rpc.Respond(&out), nil
}

func (s *containers) contDelete(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var k wire.ContKey
	if err := decode(req, &k); err != nil {
		return nil, err
	}
	if err := s.lifeMu.Lock(ctx); err != nil {
		return nil, fmt.Errorf("delete container %q: %w", k.Name, err)
	}
	defer s.lifeMu.Unlock()
	m, err := s.resolveCont(&k)
	if err != nil {
		// Deleted perhaps by this request's first copy, whose sync failed.
		return nil, s.notFoundDurably(err)
	}
	b := s.st.NewBatch()
	defer b.Close()
	b.Delete(keyCont(m.Name))
	b.Delete(keyContID(m.ID))
	tp := tagPrefix(kindContainer, m.ID)
	b.DeleteRange(tp, prefixEnd(tp))
	tc := s.touches.begin(m.ID, nameSubject('c', m.Name, 0))
	defer s.touches.end(tc)
	if err := s.st.Commit(b); err != nil {
		return nil, fmt.Errorf("delete container %q: %w", m.Name, err)
	}
	return &rpc.Response{}, nil
}

func (s *containers) contLifetime(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var c wire.ContCreate
	if err := decode(req, &c); err != nil {
		return nil, err
	}
	if c.Lifetime > 1 {
		return nil, fmt.Errorf("container %q: unknown lifetime %d (0 persistent, 1 transient): %w", c.Name, c.Lifetime, pdc.ErrInvalid)
	}
	if err := s.lifeMu.Lock(ctx); err != nil {
		return nil, fmt.Errorf("container %q: set lifetime: %w", c.Name, err)
	}
	unlocked := false
	defer func() {
		if !unlocked {
			s.lifeMu.Unlock()
		}
	}()
	m, err := s.resolveCont(&wire.ContKey{Name: c.Name})
	if errors.Is(err, pdc.ErrNotFound) {
		// Deleted perhaps by a delete whose sync failed, which a power
		// loss would bring back: "not found" once that is durable. Out
		// of lifeMu: settling may take a commit.
		s.lifeMu.Unlock()
		unlocked = true
		return nil, s.readDurably(ctx, func() string { return fmt.Sprintf("container %q: set lifetime", c.Name) }, err, nameSubject('c', c.Name, 0))
	}
	if err != nil {
		return nil, err
	}
	m.Lifetime = c.Lifetime
	b := s.st.NewBatch()
	defer b.Close()
	b.Set(keyCont(m.Name), m.Marshal(nil))
	tc := s.touches.begin(m.ID)
	defer s.touches.end(tc)
	if err := s.st.Commit(b); err != nil {
		return nil, err
	}
	return rpc.Respond(m), nil
}

package capi

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/limits"
)

// Property types (pdc_prop_type_t).
const (
	PropContCreate = 0 // PDC_CONT_CREATE
	PropObjCreate  = 1 // PDC_OBJ_CREATE
)

// PropCreate is PDCprop_create. Container properties start persistent.
func (l *Lib) PropCreate(typ int, pdcID uint64) uint64 {
	return l.runID(fmt.Sprintf("PDCprop_create(%s, pdc %d)", propTypeName(typ), pdcID), func() (uint64, error) {
		return l.propCreate(typ, pdcID)
	})
}

func propTypeName(typ int) string {
	switch typ {
	case PropContCreate:
		return "PDC_CONT_CREATE"
	case PropObjCreate:
		return "PDC_OBJ_CREATE"
	}
	return fmt.Sprint(typ)
}

func (l *Lib) propCreate(typ int, pdcID uint64) (uint64, error) {
	h, err := l.get(pdcID, kindConn)
	if err != nil {
		return 0, err
	}
	switch typ {
	case PropContCreate:
		return l.add(&handle{kind: kindContProp, conn: h.conn, lifetime: client.Persistent})
	case PropObjCreate:
		return l.objPropCreate(h.conn)
	}
	return 0, fmt.Errorf("unknown property type %d: want PDC_CONT_CREATE (0) or PDC_OBJ_CREATE (1): %w", typ, pdc.ErrInvalid)
}

// PropClose is PDCprop_close.
func (l *Lib) PropClose(id uint64) int {
	return l.run(fmt.Sprintf("PDCprop_close(%d)", id), func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		_, err := l.lookupLocked(id, kindContProp)
		if _, oerr := l.lookupLocked(id, kindObjProp); err != nil && oerr == nil {
			err = nil
		}
		if err == nil {
			delete(l.mu.handles, id)
		}
		return err
	})
}

// PropSetContLifetime is PDCprop_set_cont_lifetime: lifetime is
// PDC_PERSIST (0) or PDC_TRANSIENT (1).
func (l *Lib) PropSetContLifetime(id uint64, lifetime int) int {
	return l.run(fmt.Sprintf("PDCprop_set_cont_lifetime(%d, %d)", id, lifetime), func() error {
		if lifetime != int(client.Persistent) && lifetime != int(client.Transient) {
			return fmt.Errorf("unknown lifetime %d: want PDC_PERSIST (0) or PDC_TRANSIENT (1): %w", lifetime, pdc.ErrInvalid)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		h, err := l.lookupLocked(id, kindContProp)
		if err == nil {
			h.lifetime = client.Lifetime(lifetime)
		}
		return err
	})
}

// ContCreate is PDCcont_create: it creates the container, or opens it if
// it exists, on the connection of the property.
func (l *Lib) ContCreate(name string, propID uint64) uint64 {
	return l.runID(fmt.Sprintf("PDCcont_create(%q, prop %d)", name, propID), func() (uint64, error) {
		return l.contCreate(name, propID)
	})
}

// ContCreateCol is PDCcont_create_col. Creating is idempotent on the
// servers, so it is ContCreate: every rank gets the one container.
func (l *Lib) ContCreateCol(name string, propID uint64) uint64 {
	return l.runID(fmt.Sprintf("PDCcont_create_col(%q, prop %d)", name, propID), func() (uint64, error) {
		return l.contCreate(name, propID)
	})
}

func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("no container name (NULL or empty): %w", pdc.ErrInvalid)
	}
	return nil
}

func (l *Lib) contCreate(name string, propID uint64) (uint64, error) {
	if err := checkName(name); err != nil {
		return 0, err
	}
	if err := limits.Name("container", name, limits.MaxName); err != nil {
		return 0, err
	}
	l.mu.Lock()
	prop, err := l.lookupLocked(propID, kindContProp)
	var lifetime client.Lifetime
	if err == nil {
		lifetime = prop.lifetime
	}
	l.mu.Unlock()
	if err != nil {
		return 0, err
	}
	ctx, cancel := prop.conn.ctx()
	defer cancel()
	ct, _, err := prop.conn.c.CreateContainer(ctx, name, lifetime)
	if err != nil {
		return 0, err
	}
	return l.add(&handle{kind: kindCont, conn: prop.conn, cont: ct, refs: 1})
}

// ContOpen is PDCcont_open: it opens an existing container.
func (l *Lib) ContOpen(name string, pdcID uint64) uint64 {
	return l.runID(fmt.Sprintf("PDCcont_open(%q, pdc %d)", name, pdcID), func() (uint64, error) {
		return l.contOpen(name, pdcID)
	})
}

// ContOpenCol is PDCcont_open_col: opening needs no coordination, so it is
// ContOpen.
func (l *Lib) ContOpenCol(name string, pdcID uint64) uint64 {
	return l.runID(fmt.Sprintf("PDCcont_open_col(%q, pdc %d)", name, pdcID), func() (uint64, error) {
		return l.contOpen(name, pdcID)
	})
}

func (l *Lib) contOpen(name string, pdcID uint64) (uint64, error) {
	if err := checkName(name); err != nil {
		return 0, err
	}
	h, err := l.get(pdcID, kindConn)
	if err != nil {
		return 0, err
	}
	ctx, cancel := h.conn.ctx()
	defer cancel()
	ct, err := h.conn.c.OpenContainer(ctx, name)
	if err != nil {
		return 0, err
	}
	return l.add(&handle{kind: kindCont, conn: h.conn, cont: ct, refs: 1})
}

// ContGetID is PDCcont_get_id: the oldest handle this process has open to
// the container on the connection, with one more close owed for it, or a
// newly opened one.
func (l *Lib) ContGetID(name string, pdcID uint64) uint64 {
	return l.runID(fmt.Sprintf("PDCcont_get_id(%q, pdc %d)", name, pdcID), func() (uint64, error) {
		return l.contGetID(name, pdcID)
	})
}

func (l *Lib) contGetID(name string, pdcID uint64) (uint64, error) {
	if err := checkName(name); err != nil {
		return 0, err
	}
	l.mu.Lock()
	h, err := l.lookupLocked(pdcID, kindConn)
	if err != nil {
		l.mu.Unlock()
		return 0, err
	}
	if id, ch := l.openContLocked(name, h.conn); ch != nil {
		ch.refs++
		l.mu.Unlock()
		return id, nil
	}
	l.mu.Unlock()
	return l.contOpen(name, pdcID)
}

// openContLocked returns the oldest open handle to the container name (on
// connection p; on any if p is nil), or nil. It requires l.mu to be held.
func (l *Lib) openContLocked(name string, p *conn) (uint64, *handle) {
	var best uint64
	var bh *handle
	for id, h := range l.mu.handles {
		if h.kind == kindCont && h.cont.Name() == name && (p == nil || h.conn == p) && (bh == nil || id < best) {
			best, bh = id, h
		}
	}
	return best, bh
}

// ContClose is PDCcont_close.
func (l *Lib) ContClose(id uint64) int {
	return l.run(fmt.Sprintf("PDCcont_close(%d)", id), func() error {
		l.mu.Lock()
		h, err := l.lookupLocked(id, kindCont)
		last := false
		if err == nil {
			h.refs--
			if last = h.refs == 0; last {
				delete(l.mu.handles, id)
			}
		}
		l.mu.Unlock()
		if last {
			return h.cont.Close()
		}
		return err
	})
}

// ContInfo is what PDCcont_get_info returns.
type ContInfo struct {
	Name string
	// LocalID is this process's open handle to the container, 0 if none.
	LocalID uint64
	// MetaID is the container's id on the servers.
	MetaID uint64
}

// ContGetInfo is PDCcont_get_info: from the oldest open handle to the
// container, else from the servers through the oldest open connection.
func (l *Lib) ContGetInfo(name string) (ContInfo, int) {
	var info ContInfo
	rc := l.run(fmt.Sprintf("PDCcont_get_info(%q)", name), func() (err error) {
		info, err = l.contGetInfo(name)
		return err
	})
	return info, rc
}

func (l *Lib) contGetInfo(name string) (ContInfo, error) {
	if err := checkName(name); err != nil {
		return ContInfo{}, err
	}
	l.mu.Lock()
	if id, h := l.openContLocked(name, nil); h != nil {
		l.mu.Unlock()
		return ContInfo{Name: name, LocalID: id, MetaID: h.cont.ID()}, nil
	}
	var p *conn
	var oldest uint64
	for id, h := range l.mu.handles {
		if h.kind == kindConn && (p == nil || id < oldest) {
			p, oldest = h.conn, id
		}
	}
	l.mu.Unlock()
	if p == nil {
		return ContInfo{}, fmt.Errorf("no open container of that name and no connection to ask the servers through: call PDCinit first: %w", pdc.ErrNotFound)
	}
	ctx, cancel := p.ctx()
	defer cancel()
	ct, err := p.c.OpenContainer(ctx, name)
	if err != nil {
		return ContInfo{}, err
	}
	return ContInfo{Name: name, MetaID: ct.ID()}, nil
}

// ContPersist is PDCcont_persist: the container becomes persistent.
func (l *Lib) ContPersist(id uint64) int {
	return l.run(fmt.Sprintf("PDCcont_persist(%d)", id), func() error {
		return l.contDo(id, func(ctx context.Context, h *handle) error {
			return h.cont.SetLifetime(ctx, client.Persistent)
		})
	})
}

// ContDel is PDCcont_del: it deletes the container and its objects on the
// servers. The handle stays open until PDCcont_close.
func (l *Lib) ContDel(id uint64) int {
	return l.run(fmt.Sprintf("PDCcont_del(%d)", id), func() error {
		return l.contDo(id, func(ctx context.Context, h *handle) error {
			return h.cont.Delete(ctx)
		})
	})
}

// contDo runs fn on the container handle id, one call per handle at a
// time: a client.Container is not safe for concurrent use, and C threads
// may share a handle. fn gets the call's context: its connection's
// timeout, started before the wait for the handle.
func (l *Lib) contDo(id uint64, fn func(ctx context.Context, h *handle) error) error {
	h, err := l.get(id, kindCont)
	if err != nil {
		return err
	}
	ctx, cancel := h.conn.ctx()
	defer cancel()
	return contLocked(ctx, h, fn)
}

// contLocked runs fn on the container handle h under its lock, within
// ctx: for a call that has its deadline already.
func contLocked(ctx context.Context, h *handle, fn func(ctx context.Context, h *handle) error) error {
	if err := h.lock(ctx, func() string { return fmt.Sprintf("container %d (%q)", h.id, h.cont.Name()) }); err != nil {
		return err
	}
	defer h.unlock()
	return fn(ctx, h)
}

// maxTagValue is the metadata servers' limit on a tag's value. It is checked
// here, before the caller's bytes are copied, so that a wrong size from C
// fails with a message instead of copying past the caller's buffer.
const maxTagValue = limits.MaxTagValue

// ContPutTag is PDCcont_put_tag: value points to size bytes the caller
// owns, of type typ (pdc_var_type_t); they are copied before the call
// returns.
func (l *Lib) ContPutTag(id uint64, name string, value unsafe.Pointer, typ int, size uint64) int {
	return l.putTag("PDCcont_put_tag", id, name, value, typ, size, l.contTags)
}

func checkTag(name string) error {
	if name == "" {
		return fmt.Errorf("no tag name (NULL or empty): %w", pdc.ErrInvalid)
	}
	return nil
}

// Tag is what PDCcont_get_tag returns. Found is false for a tag that is
// not set (never, or deleted since), which PDC reports as success with a
// NULL value.
type Tag struct {
	Found bool
	Type  int // pdc_var_type_t, as the tag was stored
	Value []byte
}

// ContGetTag is PDCcont_get_tag.
func (l *Lib) ContGetTag(id uint64, name string) (Tag, int) {
	return l.getTag("PDCcont_get_tag", id, name, l.contTags)
}

// ContDelTag is PDCcont_del_tag. Deleting a tag that is not set fails,
// saying so: the name is likely mistyped.
func (l *Lib) ContDelTag(id uint64, name string) int {
	return l.delTag("PDCcont_del_tag", id, name, l.contTags)
}

// contTags runs fn on a container handle's tags; exists says whether the
// container is still there.
func (l *Lib) contTags(id uint64, fn func(ctx context.Context, t tagged, exists func(context.Context) error) error) error {
	return l.contDo(id, func(ctx context.Context, h *handle) error {
		return fn(ctx, h.cont, func(ctx context.Context) error {
			_, err := h.conn.c.OpenContainerID(ctx, h.cont.ID())
			return err
		})
	})
}

package regionstore

import (
	"fmt"

	"github.com/pdcgo/pdc/internal/vfs"
)

// Cut applies dims of version to object obj's files, as a call carrying
// them would, using the object's own mode and element size: a shrink
// cuts what lies past the new dims, a relayout moves the data, and the
// version is raised. Unlike a call it is made durable (the file is
// fsynced) whatever Options.Sync says: the metadata server that pushed it
// forgets it once acknowledged, and a later dims version must never find
// the data uncut. An object without files here has nothing to cut, and
// costs no memory when it was not used since Open. Dims older than the
// object's newest are ignored: a newer version already reached it.
func (s *Store) Cut(obj uint64, dims []uint64, version uint64) error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return errClosed
	}
	_, listed := s.mu.onDisk[obj]
	used := s.mu.objects[obj] != nil
	s.mu.Unlock()
	if !listed && !used {
		return nil
	}
	o, err := s.object(obj)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if s.closed.Load() {
		return errClosed
	}
	if o.gone {
		return nil
	}
	if err := s.load(o); err != nil {
		return err
	}
	// The same version is applied again: its mark goes to the file
	// before its dims do (raiseVersion), so a crash between the two
	// leaves the version with the older layout under it, and the
	// metadata server, which keeps a cut until a push is acknowledged,
	// pushes it again after the restart. Applying it again is a no-op
	// when the dims are there already: a version has one dims.
	if o.mode == 0 || version < o.version {
		return nil
	}
	l := Layout{Dims: dims, Mode: o.mode}
	switch o.mode {
	case ByOffset:
		l.Elem = o.off.elem
	case ByRegion:
		l.Elem = o.reg.elem
	}
	if err := conforms(o, l); err != nil {
		return err
	}
	if err := s.rewrite(o); err != nil {
		return err
	}
	if err := s.raiseVersion(o, version); err != nil {
		return err
	}
	if err := s.setDims(o, dims, 0); err != nil {
		return err
	}
	path := o.off.pathOr(o.reg)
	if err := s.withFile(path, func(f vfs.File) error { return f.Sync() }); err != nil {
		return fmt.Errorf("region store: object %d: cut to dims %v (version %d): %s: %w", obj, dims, version, path, err)
	}
	// A relayout's rename whose directory fsync failed is not durable:
	// a power loss would bring the old file back, uncut, once the
	// metadata server has forgotten the cut.
	if err := s.syncName(o); err != nil {
		return fmt.Errorf("region store: object %d: cut to dims %v (version %d): %s: %w", obj, dims, version, path, err)
	}
	return nil
}

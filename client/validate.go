package client

import (
	"fmt"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/limits"
)

// The client checks what it creates as the metadata servers do (package
// limits), so that a mistake fails before any request, with the message
// the server would give.

// objectNamed names an object in an error message, formatted only when a
// message is: quoting every valid create's name would cost more than the
// checks.
type objectNamed string

func (n objectNamed) String() string { return fmt.Sprintf("object %q", string(n)) }

// checkSpec checks an object to create.
func checkSpec(s *ObjectSpec) error {
	if err := limits.Name("object", s.Name, limits.MaxName); err != nil {
		return err
	}
	what, p := objectNamed(s.Name), &s.Props
	if err := limits.Shape(what, p.Dims, p.Type); err != nil {
		return err
	}
	if p.Partition > RegionLocal {
		return fmt.Errorf("%s: unknown partition strategy %d (want 0 object static, 1 region static, 2 region dynamic, 3 region local): %w",
			what, uint32(p.Partition), pdc.ErrInvalid)
	}
	if err := limits.Storage(what, uint32(p.Storage)); err != nil {
		return err
	}
	if err := limits.AppName(p.AppName); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// checkTag checks a tag to put.
func checkTag(name string, v TagValue) error {
	if err := limits.Name("tag", name, limits.MaxTagName); err != nil {
		return err
	}
	return limits.TagValue(name, v.Type, v.Value)
}

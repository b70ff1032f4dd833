package metaserver

import (
	"fmt"
	"math"
	"strings"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// Limits on what clients may store.
const (
	MaxNameLen     = 1024    // container and object names, bytes
	MaxTagNameLen  = 256     // tag names, bytes
	MaxTagValueLen = 1 << 16 // tag values, bytes
	MaxDims        = 32
	// Unlimited is PDC_SIZE_UNLIMITED: a first dim that can grow.
	Unlimited = math.MaxUint64
	// Partition strategies: PDC_OBJ_STATIC .. PDC_REGION_LOCAL.
	maxPartition = 3
	// Consistency: PDC_CONSISTENCY_DEFAULT .. _EVENTUAL.
	maxConsistency = 4
)

func checkName(what, name string, max int) error {
	switch {
	case name == "":
		return fmt.Errorf("%s name is empty: %w", what, pdc.ErrInvalid)
	case len(name) > max:
		return fmt.Errorf("%s name %.40q... is %d bytes, over the limit of %d: %w", what, name, len(name), max, pdc.ErrInvalid)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%s name %q contains a NUL byte: %w", what, name, pdc.ErrInvalid)
	}
	return nil
}

// objectNamed names an object in an error message. It is formatted only
// when a message is: quoting the name of every valid create costs more
// than the checks.
type objectNamed string

func (n objectNamed) String() string { return fmt.Sprintf("object %q", string(n)) }

// checkDims checks dims; what (a string or a fmt.Stringer) names their
// owner in the error.
func checkDims(what any, dims []uint64) error {
	if len(dims) == 0 || len(dims) > MaxDims {
		return fmt.Errorf("%s has %d dims; want 1 to %d: %w", what, len(dims), MaxDims, pdc.ErrInvalid)
	}
	for i, d := range dims {
		if d == 0 {
			return fmt.Errorf("%s: dim %d is 0: %w", what, i, pdc.ErrInvalid)
		}
		if d == Unlimited && i > 0 {
			return fmt.Errorf("%s: dim %d is unlimited; only the first dim may be: %w", what, i, pdc.ErrInvalid)
		}
	}
	return nil
}

func checkProps(name string, p *wire.ObjectProps) error {
	what := objectNamed(name)
	if err := checkDims(what, p.Dims); err != nil {
		return err
	}
	if !region.Type(p.Type).Valid() {
		return fmt.Errorf("%s: unknown element type %d: %w", what, p.Type, pdc.ErrInvalid)
	}
	if p.Partition > maxPartition {
		return fmt.Errorf("%s: unknown partition strategy %d (want 0 object static, 1 region static, 2 region dynamic, 3 region local): %w", what, p.Partition, pdc.ErrInvalid)
	}
	if p.Consistency > maxConsistency {
		return fmt.Errorf("%s: unknown consistency %d (want 0 to %d): %w", what, p.Consistency, maxConsistency, pdc.ErrInvalid)
	}
	if len(p.AppName) > MaxNameLen || strings.IndexByte(p.AppName, 0) >= 0 {
		return fmt.Errorf("%s: app name too long or contains NUL: %w", what, pdc.ErrInvalid)
	}
	if len(p.DataLoc) > 4096 || len(p.Tags) > MaxTagValueLen {
		return fmt.Errorf("%s: data location or tags string too long: %w", what, pdc.ErrInvalid)
	}
	return nil
}

func checkTag(t *wire.TagPut) error {
	if err := checkName("tag", t.Name, MaxTagNameLen); err != nil {
		return err
	}
	if !region.Type(t.Type).Valid() {
		return fmt.Errorf("tag %q: unknown value type %d: %w", t.Name, t.Type, pdc.ErrInvalid)
	}
	if len(t.Value) > MaxTagValueLen {
		return fmt.Errorf("tag %q: value of %d bytes is over the limit of %d: %w", t.Name, len(t.Value), MaxTagValueLen, pdc.ErrTooLarge)
	}
	if t.Kind != kindObject && t.Kind != kindContainer {
		return fmt.Errorf("tag %q: unknown target kind %d: %w", t.Name, t.Kind, pdc.ErrInvalid)
	}
	return nil
}

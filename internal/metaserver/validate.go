package metaserver

import (
	"fmt"
	"math"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/limits"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// Limits on what clients may store (package limits).
const (
	MaxNameLen     = limits.MaxName     // container and object names, bytes
	MaxTagNameLen  = limits.MaxTagName  // tag names, bytes
	MaxTagValueLen = limits.MaxTagValue // tag values, bytes
	MaxDims        = limits.MaxDims
	// Unlimited is PDC_SIZE_UNLIMITED: a first dim that can grow.
	Unlimited = math.MaxUint64
	// Partition strategies: PDC_OBJ_STATIC .. PDC_REGION_LOCAL.
	maxPartition = 3
	// Consistency: PDC_CONSISTENCY_DEFAULT .. _EVENTUAL.
	maxConsistency = 4
)

// checkName checks a name used to find something: names stored before
// the rules for new names (limits.Name) can still be opened and deleted.
func checkName(what, name string, max int) error {
	return limits.Lookup(what, name, max)
}

// checkNewName checks a name something is created under.
func checkNewName(what, name string, max int) error {
	return limits.Name(what, name, max)
}

// objectNamed names an object in an error message. It is formatted only
// when a message is: quoting the name of every valid create costs more
// than the checks.
type objectNamed string

func (n objectNamed) String() string { return fmt.Sprintf("object %q", string(n)) }

// checkDims checks dims of elem-byte elements; what (a string or a
// fmt.Stringer) names their owner in the error.
func checkDims(what any, dims []uint64, elem int) error {
	return limits.Dims(what, dims, elem)
}

func checkProps(name string, p *wire.ObjectProps) error {
	what := objectNamed(name)
	if err := limits.Shape(what, p.Dims, region.Type(p.Type)); err != nil {
		return err
	}
	if p.Partition > maxPartition {
		return fmt.Errorf("%s: unknown partition strategy %d (want 0 object static, 1 region static, 2 region dynamic, 3 region local): %w", what, p.Partition, pdc.ErrInvalid)
	}
	if p.Consistency > maxConsistency {
		return fmt.Errorf("%s: unknown consistency %d (want 0 to %d): %w", what, p.Consistency, maxConsistency, pdc.ErrInvalid)
	}
	if err := limits.Storage(what, p.Storage); err != nil {
		return err
	}
	if err := limits.AppName(p.AppName); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if len(p.DataLoc) > 4096 || len(p.Tags) > MaxTagValueLen {
		return fmt.Errorf("%s: data location or tags string too long: %w", what, pdc.ErrInvalid)
	}
	return nil
}

func checkTag(t *wire.TagPut) error {
	if err := checkNewName("tag", t.Name, MaxTagNameLen); err != nil {
		return err
	}
	if err := limits.TagValue(t.Name, region.Type(t.Type), t.Value); err != nil {
		return err
	}
	if t.Kind != kindObject && t.Kind != kindContainer {
		return fmt.Errorf("tag %q: unknown target kind %d: %w", t.Name, t.Kind, pdc.ErrInvalid)
	}
	return nil
}

package crashloop

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc/region"
)

// A write id names one write (of cells, a tag or a create): its cycle,
// the process that made it and its number there. Ids are unique over a
// whole run and never zero, so that zero is "never written".
//
//	bits 39..24: cycle, 23..20: process, 19..0: sequence (from 1)
func writeID(cycle, proc int, seq uint64) uint64 {
	return uint64(cycle&0xffff)<<24 | uint64(proc&0xf)<<20 | seq&0xfffff
}

// maxSeq is the most writes one process makes in a cycle.
const maxSeq = 1<<20 - 1

// maxCells bounds an object's cells, so a cell index fits in a value.
const maxCells = 1 << 24

// A cell holds wid<<24 | its own index in the object (row-major), as a
// little-endian uint64.
func cellValue(wid, cell uint64) uint64 { return wid<<24 | cell }

// decodeCell returns the write id a cell's value names, and whether the
// value belongs to that cell at all (zero, never written, does).
func decodeCell(v, cell uint64) (wid uint64, ok bool) {
	if v == 0 {
		return 0, true
	}
	return v >> 24, v&(maxCells-1) == cell
}

// fillCells fills buf with the values of write wid over box of an object
// whose spanDims are span.
func fillCells(buf []byte, span []uint64, box region.Box, wid uint64) {
	i := 0
	forCells(span, box, func(cell uint64) {
		binary.LittleEndian.PutUint64(buf[8*i:], cellValue(wid, cell))
		i++
	})
}

// forCells calls fn with the index in the object of every cell of box,
// in box's row-major order.
func forCells(dims []uint64, box region.Box, fn func(cell uint64)) {
	region.Runs(region.Shape(dims...), box, func(r region.Run) bool {
		for c := r.Off; c < r.Off+r.Len; c++ {
			fn(c)
		}
		return true
	})
}

// now is CLOCK_MONOTONIC in nanoseconds: one clock for every process on
// the host, so that the logs of several processes order their events.
func now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

// maxGrowth bounds set dims: the first dim of an object stays between 1
// and maxGrowth times the one it was created with, each other dim
// between 1 and trailingGrowth times its own. Elements keep their
// coordinates when the dims change (a by-offset file is laid out again,
// docs/design/0006), so a cell is named by its coordinates: its index is
// row-major in spanDims, whatever dims it was written under.
const (
	maxGrowth      = 2
	trailingGrowth = 1.5
)

// objectName names an object created by write wid with the given shape,
// partition and storage (indexes of shapes, partitions, storages): any
// process can create it again, after a delete, as it was.
func objectName(wid uint64, shape, part, storage int) string {
	return fmt.Sprintf("o%x-%d%d%d", wid, shape, part, storage)
}

// propsOfName returns the props an objectName stands for; ok is false for
// other names.
func propsOfName(name string) (p ObjProps, ok bool) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 || len(name)-i != 4 {
		return p, false
	}
	sh, pa, st := int(name[i+1]-'0'), int(name[i+2]-'0'), int(name[i+3]-'0')
	if sh < 0 || sh >= len(shapes) || pa < 0 || pa >= len(partitions) || st < 0 || st >= len(storages) {
		return p, false
	}
	return ObjProps{Dims: shapes[sh], Partition: pa, Storage: st}, true
}

// spanDims are the dims of every cell an object of props may ever have:
// its first dim grown by maxGrowth, the others by trailingGrowth. Cell
// indexes are row-major in them.
func spanDims(props *ObjProps) []uint64 {
	d := slices.Clone(props.Dims)
	d[0] *= maxGrowth
	for i := 1; i < len(d); i++ {
		d[i] = uint64(float64(d[i]) * trailingGrowth)
	}
	return d
}

// outside reports whether cell (row-major in span) lies outside dims.
func outside(span, dims []uint64, cell uint64) bool {
	for i := len(span) - 1; i >= 0; i-- {
		if cell%span[i] >= dims[i] {
			return true
		}
		cell /= span[i]
	}
	return false
}

// dimsValue is dims as the value of a register (each dim under 2^16).
func dimsValue(dims []uint64) uint64 {
	var v uint64
	for i, d := range dims {
		v |= d << (16 * i)
	}
	return v
}

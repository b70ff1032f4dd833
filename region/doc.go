// Package region is pdc's pure n-dimensional array vocabulary: element
// types (PDC's pdc_var_type_t, in the same order) and boxes (PDC's regions:
// an offset and a size per dimension, any number of dimensions from 1 to
// MaxDims) with the math region I/O needs: checks against an object's
// dims, intersection and containment, cutting into grid blocks or equal
// pieces, row-major linearization, the contiguous runs a box occupies in a
// buffer, and copying a box between two row-major buffers of different
// shapes. It does no I/O and takes no clock.
package region

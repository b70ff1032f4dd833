// Package region is pdc's pure n-dimensional array vocabulary: element
// types (PDC's pdc_var_type_t, in the same order), and, as region I/O lands,
// boxes and the math on them. It does no I/O.
package region

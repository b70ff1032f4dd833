package dataquery_test

import "unsafe"

func unsafeBytes(b []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b))), 8*len(b))
}

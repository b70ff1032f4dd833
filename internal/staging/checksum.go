package staging

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"runtime"
	"sync"

	"github.com/pdcgo/pdc"
)

// Table is CRC-32C (Castagnoli), which the CPU computes in hardware: the
// checksum of staged files.
var Table = crc32.MakeTable(crc32.Castagnoli)

// castagnoli is the reflected Castagnoli polynomial.
const castagnoli = 0x82F63B78

// parallelMin is the size from which FileCRC splits the work over the
// processors: below it, starting goroutines costs more than it saves.
const parallelMin = 32 << 20

// FileCRC returns the CRC-32C of the first size bytes of f, large files in
// one part per processor whose checksums are then combined. A file shorter
// than size is an error. It stops when ctx ends: a large file's pass takes
// seconds, past any deadline of the produce or consume it serves.
func FileCRC(ctx context.Context, f *os.File, size int64) (uint32, error) {
	parts := int64(runtime.GOMAXPROCS(0))
	if size < parallelMin || parts < 2 {
		return sectionCRC(ctx, f, 0, size)
	}
	per := (size/parts + 4095) &^ 4095
	crcs := make([]uint32, parts)
	lens := make([]int64, parts)
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for i := range parts {
		lo := min(i*per, size)
		hi := min(lo+per, size)
		lens[i] = hi - lo
		wg.Go(func() { crcs[i], errs[i] = sectionCRC(ctx, f, lo, hi-lo) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, err // the others are mostly the same (a context that ended)
		}
	}
	crc := crcs[0]
	for i := int64(1); i < parts; i++ {
		crc = CombineCRC(crc, crcs[i], lens[i])
	}
	return crc, nil
}

// bufSize is the size of the buffers files are read and written through.
const bufSize = 4 << 20

// bufs keeps them: a fresh one costs a page fault per 4 KiB, as much as
// reading a megabyte into it.
var bufs = sync.Pool{New: func() any { return new([bufSize]byte) }}

// Buf lends a buffer of 4 MiB; give it back with PutBuf.
func Buf() *[bufSize]byte { return bufs.Get().(*[bufSize]byte) }

// PutBuf returns a buffer lent by Buf.
func PutBuf(b *[bufSize]byte) { bufs.Put(b) }

func sectionCRC(ctx context.Context, f *os.File, off, n int64) (uint32, error) {
	b := Buf()
	defer PutBuf(b)
	buf := b[:min(max(n, 1), bufSize)]
	var crc uint32
	for done := int64(0); done < n; {
		if ctx.Err() != nil {
			return 0, fmt.Errorf("checksum %q: %w", f.Name(), pdc.CtxErr(ctx))
		}
		want := min(int64(len(buf)), n-done)
		k, err := f.ReadAt(buf[:want], off+done)
		crc = crc32.Update(crc, Table, buf[:k])
		done += int64(k)
		if err != nil && !(err == io.EOF && done == n) {
			if err == io.EOF {
				return 0, fmt.Errorf("checksum %q: the file ends at %d bytes, before %d: %w", f.Name(), off+done, off+n, io.ErrUnexpectedEOF)
			}
			return 0, fmt.Errorf("checksum %q: %w", f.Name(), err)
		}
	}
	return crc, nil
}

// CombineCRC returns the CRC-32C of A followed by B, given crcA, crcB and
// the length of B: appending lenB zero bits to A's register is a linear
// map, applied by repeated squaring (as zlib's crc32_combine does).
func CombineCRC(crcA, crcB uint32, lenB int64) uint32 {
	if lenB <= 0 {
		return crcA
	}
	var even, odd [32]uint32
	odd[0] = castagnoli // the operator for one zero bit
	row := uint32(1)
	for i := 1; i < 32; i++ {
		odd[i] = row
		row <<= 1
	}
	gf2Square(&even, &odd) // two zero bits
	gf2Square(&odd, &even) // four
	for {
		gf2Square(&even, &odd) // one zero byte, then 4, 16, ...
		if lenB&1 != 0 {
			crcA = gf2Times(&even, crcA)
		}
		lenB >>= 1
		if lenB == 0 {
			break
		}
		gf2Square(&odd, &even)
		if lenB&1 != 0 {
			crcA = gf2Times(&odd, crcA)
		}
		lenB >>= 1
		if lenB == 0 {
			break
		}
	}
	return crcA ^ crcB
}

func gf2Times(mat *[32]uint32, vec uint32) uint32 {
	var sum uint32
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
	}
	return sum
}

func gf2Square(square, mat *[32]uint32) {
	for i := range 32 {
		square[i] = gf2Times(mat, mat[i])
	}
}

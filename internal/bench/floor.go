package bench

import (
	"context"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// storeFloor measures, on one core and with nothing in between, the work
// a data server cannot skip for each byte it stores or serves, next to the
// raw ceiling (rawOnce) measured alongside:
//   - write: 1 MiB pwrites into the page cache, each 4 KiB block
//     checksummed (CRC-32) first, as the store does;
//   - read: each 4 KiB block of a file in the page cache checksummed
//     through a mapping, then copied into a buffer, as a read served from
//     a view is.
//
// A transfer that must do this work cannot be faster than it, whatever
// the transport: where the floor is below 0.85 of the ceiling, so is every
// case of that transport.
func storeFloor(ctx context.Context, dir string, size int64, rounds int, src, dst []byte, rawOnce func() (time.Duration, error), bench, ceiling string) ([]Result, error) {
	f, err := os.CreateTemp(dir, "floor-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	const chunk = 1 << 20
	sums := make([]uint32, chunk/floorBlock)
	write := func() (time.Duration, error) {
		t0 := time.Now()
		for off := int64(0); off < size; off += chunk {
			b := src[off:min(off+chunk, size)]
			sumBlocks(sums, b)
			if _, err := f.WriteAt(b, off); err != nil {
				return 0, err
			}
		}
		return time.Since(t0), ctx.Err()
	}
	var wT, rT, rawT []time.Duration
	if _, err := write(); err != nil { // the file's blocks exist from now on, as an object's do after its first write
		return nil, fmt.Errorf("store floor: %w", err)
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("store floor: map %s: %w", filepath.Base(f.Name()), err)
	}
	defer syscall.Munmap(m)
	read := func() (time.Duration, error) {
		t0 := time.Now()
		for off := int64(0); off < size; off += chunk {
			b := m[off:min(off+chunk, size)]
			sumBlocks(sums, b)
			copy(dst[off:], b)
		}
		return time.Since(t0), ctx.Err()
	}
	if _, err := read(); err != nil { // map the pages, as a kept view has them
		return nil, fmt.Errorf("store floor: %w", err)
	}
	var out []Result
	names := storeFloorNames(size)
	for range rounds {
		for _, step := range []struct {
			f  func() (time.Duration, error)
			ts *[]time.Duration
		}{{write, &wT}, {rawOnce, &rawT}, {read, &rT}, {rawOnce, &rawT}} {
			d, err := step.f()
			if err != nil {
				return nil, fmt.Errorf("store floor: %w", err)
			}
			*step.ts = append(*step.ts, d)
		}
		i := len(wT) - 1
		out = append(out,
			rate(bench, names[0], gbps(size, wT[i:]), "GB/s", ceiling, gbps(size, rawT[2*i:2*i+1])),
			rate(bench, names[1], gbps(size, rT[i:]), "GB/s", ceiling, gbps(size, rawT[2*i+1:])))
	}
	return out, nil
}

func storeFloorNames(size int64) []string {
	return []string{
		fmt.Sprintf("store floor: write %s, 1 MiB pwrites with CRC-32 per 4 KiB, one core", sizeName(size)),
		fmt.Sprintf("store floor: read %s, CRC-32 per 4 KiB and copy from the page cache, one core", sizeName(size)),
	}
}

// floorBlock is the store's unit of checksumming.
const floorBlock = 4 << 10

// sumBlocks checksums b per floorBlock into sums, as the store does.
func sumBlocks(sums []uint32, b []byte) {
	for i := 0; i*floorBlock < len(b); i++ {
		sums[i] = crc32.ChecksumIEEE(b[i*floorBlock : min((i+1)*floorBlock, len(b))])
	}
}

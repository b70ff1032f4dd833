package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/netio"
	"github.com/pdcgo/pdc/internal/staging"
)

// consumeFloor measures, in alternation with the raw fetch of the same
// bytes (the consumes' ceiling), the work no consume of a file of size
// bytes can skip on the consumer's host, done in turn on one goroutine:
//   - the owner lookup's round trip (a file of at most staging.InlineMax
//     bytes travels in it, so there the fetch is the only round trip);
//   - the bytes fetched raw, in pieces of at most 1 MiB as they arrive;
//   - each piece checksummed (CRC-32C; the whole checked against the
//     first floor's, as a consume checks the record's) and written into a new file in dir
//     (the page cache's fresh pages: the copy is a new file, which the
//     raw fetch into a reused buffer never pays for);
//   - the file fsynced unless dir is memory, and renamed into place.
//
// It is what a consume would cost with the transports, the record and
// every check taken out: where its ratio to the ceiling is below a
// target, no consume on this host can meet that target unless it
// overlaps these steps on more processors than the transfer leaves free.
func consumeFloor(ctx context.Context, cfg StageConfig, size int64, buf []byte, tcp net.Conn) (Result, error) {
	echo, err := dialRaw(ctx, cfg.RawEcho)
	if err != nil {
		return Result{}, fmt.Errorf("raw echo: %w", err)
	}
	defer echo.Close()
	if err := os.MkdirAll(cfg.FloorDir, 0o700); err != nil {
		return Result{}, fmt.Errorf("consume floor: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(cfg.FloorDir, &st); err != nil {
		return Result{}, fmt.Errorf("consume floor: %s: %w", cfg.FloorDir, err)
	}
	memory := st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC
	dst := filepath.Join(cfg.FloorDir, fmt.Sprintf("floor-%d", size))
	tmp := dst + ".tmp"
	piece := buf[:min(size, 1<<20)]
	msg, in := make([]byte, 64), make([]byte, 64)
	// The first floor learns the bytes' checksum; every later one checks
	// its own against it, as a consume checks the record's.
	var want uint32
	known := false
	floor := func() error {
		if size > staging.InlineMax {
			if _, err := echo.Write(msg); err != nil {
				return err
			}
			if _, err := io.ReadFull(echo, in); err != nil {
				return err
			}
		}
		f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		var req [8]byte
		binary.LittleEndian.PutUint64(req[:], uint64(size))
		if _, err := netio.WriteFull(ctx, tcp, req[:]); err != nil {
			return err
		}
		crc := uint32(0)
		for off := int64(0); off < size; off += int64(len(piece)) {
			p := piece[:min(int64(len(piece)), size-off)]
			if _, err := netio.ReadFull(ctx, tcp, p); err != nil {
				return err
			}
			crc = crc32.Update(crc, castagnoli, p)
			if _, err := f.WriteAt(p, off); err != nil {
				return err
			}
		}
		if known && crc != want {
			return fmt.Errorf("checksum %08x, want %08x: %w", crc, want, pdc.ErrChecksum)
		}
		want, known = crc, true
		if !memory {
			if err := f.Sync(); err != nil {
				return err
			}
		}
		if err := f.Close(); err != nil {
			return err
		}
		return os.Rename(tmp, dst)
	}
	raw := func() error { return rawFetch(ctx, tcp, buf) }
	remove := func() error { return os.Remove(dst) }
	if err := floor(); err != nil { // warm up, as consumes does
		os.Remove(tmp)
		return Result{}, fmt.Errorf("consume floor %s: %w", sizeName(size), err)
	}
	if err := remove(); err != nil {
		return Result{}, err
	}
	ourT, rawT, err := alternateTimed(ctx, cfg.MinOps, cfg.Budget, time.Now, floor, raw, remove)
	if err != nil {
		os.Remove(tmp)
		return Result{}, fmt.Errorf("consume floor %s: %w", sizeName(size), err)
	}
	if size <= 1<<20 {
		return latency(stageBench(cfg), floorCase(size), ms(median(ourT)), "ms", "raw tcp request p50", ms(median(rawT))), nil
	}
	return rate(stageBench(cfg), floorCase(size), gbps(size, ourT), "GB/s", "raw tcp", gbps(size, rawT)), nil
}

// floorSteps says what a consume floor of size bytes does.
func floorSteps(size int64) string {
	s := "the raw bytes CRC-32C'd into a new file, one goroutine"
	if size > staging.InlineMax {
		s = "a round trip, then " + s
	}
	return s
}

// floorCase names the floor case of a size, as consumeFloor reports it.
func floorCase(size int64) string {
	name := "consume floor " + sizeName(size) + ": " + floorSteps(size)
	if size <= 1<<20 {
		return name + " p50"
	}
	return name
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

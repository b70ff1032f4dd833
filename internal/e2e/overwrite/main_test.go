// Package overwrite_test interrupts overwrites end to end: a client
// process that exits or is killed with its overwrites on the way, and a
// data server killed with kill -9 while it stores them. Whatever is
// acknowledged must read back as itself or as a later write, in every
// partition strategy and storage mode: never zeros, never an error. A
// package of its own, so that its test binary runs beside the other
// end-to-end packages.
package overwrite_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/region"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m, clientRole)) }

// Environment of the "overwrite" role.
const (
	specEnv  = "PDC_OW_SPEC"  // JSON []writeSpec: the overwrites to start
	delayEnv = "PDC_OW_DELAY" // microseconds to wait after starting them; -1: wait to be killed
)

// writeSpec is one overwrite a client process starts and never waits.
type writeSpec struct {
	Name string
	Gen  uint32
	Box  region.Box
	Dims []uint64
}

// clientRole is this test binary run as a client process (e2e.ClientProc).
func clientRole(ctx context.Context, c *client.Client, role string, out *bufio.Writer) error {
	if role != "overwrite" {
		return fmt.Errorf("unknown role %q", role)
	}
	var specs []writeSpec
	if err := json.Unmarshal([]byte(os.Getenv(specEnv)), &specs); err != nil {
		return err
	}
	delay, err := strconv.Atoi(os.Getenv(delayEnv))
	if err != nil {
		return err
	}
	objs := make([]*client.Object, len(specs))
	bufs := make([][]byte, len(specs))
	for i, s := range specs {
		if objs[i], err = c.OpenObject(ctx, s.Name); err != nil {
			return err
		}
		bufs[i] = genData(s.Dims, s.Box, s.Gen)
	}
	for i, s := range specs {
		if _, err := objs[i].StartWrite(ctx, s.Box, bufs[i]); err != nil {
			return err
		}
	}
	if delay < 0 {
		fmt.Fprintln(out, "started")
		if err := out.Flush(); err != nil {
			return err
		}
		// Killed while the overwrites are on their way; stdin stays open.
		_, _ = io.Copy(io.Discard, os.Stdin)
		return fmt.Errorf("not killed")
	}
	// The walltime limit, an OOM kill, a Ctrl-C: the process ends with its
	// transfers under way, without closing anything.
	time.Sleep(time.Duration(delay) * time.Microsecond)
	os.Exit(0)
	return nil
}

// genData is box's elements of an object of dims as written by
// generation gen: each int64 holds the generation above the element's
// row-major index (plus one), so that no value is zero and every value
// says which write put it where.
func genData(dims []uint64, box region.Box, gen uint32) []byte {
	buf := make([]byte, 8*box.Volume())
	i := 0
	region.Runs(region.Shape(dims...), box, func(r region.Run) bool {
		for k := range r.Len {
			binary.LittleEndian.PutUint64(buf[8*i:], uint64(gen)<<32|(r.Off+k+1)&0xffffffff)
			i++
		}
		return true
	})
	return buf
}

package clitest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/region"
)

// Role is the e2e.Role of the command line's end-to-end packages whose
// tests run client processes: a test binary re-run as a client process
// (e2e.ClientProc) plays one of
//
//	writer: creates PDC_E2E_N objects one at a time in container "c", each
//	        with tags, printing "ok NAME" once both are acknowledged and
//	        "fail NAME ERR" otherwise; it keeps going through failures.
//	reader: opens every name given on stdin and checks its tags, printing
//	        "ok NAME" or "bad NAME WHY".
//	region-writer, region-reader: see regionRole.
//	stale-handle: see staleHandleRole.
//	deleter: see deleterRole.
//	survivor: see survivorRole.
func Role(ctx context.Context, c *client.Client, role string, out *bufio.Writer) error {
	switch role {
	case "writer":
		n, _ := strconv.Atoi(os.Getenv("PDC_E2E_N"))
		ct, _, err := c.CreateContainer(ctx, "c", client.Persistent)
		if err != nil {
			return err
		}
		for i := range n {
			name := fmt.Sprintf("obj%05d", i)
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := writeOne(cctx, ct, name, i)
			cancel()
			if err != nil {
				fmt.Fprintf(out, "fail %s %v\n", name, err)
			} else {
				fmt.Fprintf(out, "ok %s\n", name)
			}
			out.Flush()
		}
		return nil
	case "reader":
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			name := sc.Text()
			i, _ := strconv.Atoi(strings.TrimPrefix(name, "obj"))
			if why := readOne(ctx, c, name, i); why != "" {
				fmt.Fprintf(out, "bad %s %s\n", name, why)
			} else {
				fmt.Fprintf(out, "ok %s\n", name)
			}
		}
		return sc.Err()
	case "region-writer", "region-reader":
		return regionRole(ctx, c, role, out)
	case "stale-handle":
		return staleHandleRole(ctx, c, out)
	case "deleter":
		return deleterRole(ctx, c, out)
	case "survivor":
		return survivorRole(ctx, c, out)
	}
	return fmt.Errorf("unknown role %q", role)
}

func writeOne(ctx context.Context, ct *client.Container, name string, i int) error {
	o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: []uint64{uint64(i + 1), 8}, Type: region.Double})
	if err != nil {
		return err
	}
	defer o.Close(ctx)
	if err := o.PutTag(ctx, "index", client.Int64(int64(i))); err != nil {
		return err
	}
	return o.PutTag(ctx, "label", client.String("label-"+name))
}

func readOne(ctx context.Context, c *client.Client, name string, i int) string {
	o, err := c.OpenObject(ctx, name)
	if err != nil {
		return err.Error()
	}
	defer o.Close(ctx)
	if d := o.Info().Props.Dims; len(d) != 2 || d[0] != uint64(i+1) || d[1] != 8 {
		return fmt.Sprintf("dims %v", d)
	}
	v, err := o.GetTag(ctx, "index")
	if err != nil {
		return err.Error()
	}
	if v.String() != strconv.Itoa(i) || v.Type != region.Int64 {
		return fmt.Sprintf("tag index = %s (%s)", v, v.Type)
	}
	v, err = o.GetTag(ctx, "label")
	if err != nil || v.String() != "label-"+name {
		return fmt.Sprintf("tag label = %q, %v", v.String(), err)
	}
	return ""
}

// ReadAll runs a reader process over names, which a writer process
// created, and returns its complaints.
func ReadAll(t *testing.T, tmpdir string, names []string) []string {
	t.Helper()
	cmd, out, in := e2e.ClientProc(t, tmpdir, "reader")
	go func() {
		for _, n := range names {
			fmt.Fprintln(in, n)
		}
		in.Close()
	}()
	var bad []string
	seen := 0
	for out.Scan() {
		line := out.Text()
		seen++
		if !strings.HasPrefix(line, "ok ") {
			bad = append(bad, line)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("reader: %v", err)
	}
	if seen != len(names) {
		t.Fatalf("reader answered %d of %d names", seen, len(names))
	}
	return bad
}

package clitest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// staleHandleRole is the client role "stale-handle": it opens the object
// $PDC_E2E_OBJ, says "open", then does what each line on stdin says:
//
//	write  write the whole object: "write ok" or "write err NOTFOUND MSG"
//	read   read it: "read ok" or "read err NOTFOUND MSG"
//	race   write it again and again, saying "racing" after the first
//	       write, until a write fails: "race err NOTFOUND MSG N" (N
//	       writes succeeded), or for at most 20 s: "race ok"
//	close  close the handle: "close ok" or "close err NOTFOUND MSG"
//
// NOTFOUND is whether the error is pdc.ErrNotFound.
func staleHandleRole(ctx context.Context, c *client.Client, out *bufio.Writer) error {
	o, err := c.OpenObject(ctx, os.Getenv("PDC_E2E_OBJ"))
	if err != nil {
		return err
	}
	whole := region.Shape(o.Info().Props.Dims...)
	buf := make([]byte, whole.Volume()*uint64(o.Info().Props.Type.Size()))
	say := func(what string, err error, extra ...any) {
		if err == nil {
			fmt.Fprintln(out, what, "ok")
		} else {
			fmt.Fprintln(out, append([]any{what, "err", errors.Is(err, pdc.ErrNotFound), strings.ReplaceAll(err.Error(), "\n", " ")}, extra...)...)
		}
		out.Flush()
	}
	fmt.Fprintln(out, "open")
	out.Flush()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "write":
			say("write", o.Write(ctx, whole, buf))
		case "read":
			say("read", o.Read(ctx, whole, buf))
		case "close":
			say("close", o.Close(ctx))
		case "race":
			// Bounded, so that writes that never fail (a delete that does
			// not stop them) end the race with "race ok N".
			n := 0
			var err error
			end := time.Now().Add(20 * time.Second)
			for ; n < 10_000 && time.Now().Before(end); n++ {
				if err = o.Write(ctx, whole, buf); err != nil {
					break
				}
				if n == 0 {
					fmt.Fprintln(out, "racing")
					out.Flush()
				}
			}
			say("race", err, n)
		}
	}
	return sc.Err()
}

// ObjectFiles lists the files of object id in the cluster's data dirs,
// under datadir.
func ObjectFiles(t *testing.T, datadir string, id uint64) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(datadir, "data-*", fmt.Sprintf("%016x.*", id)))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// deleterRole is the client role "deleter": it deletes the objects named
// in $PDC_E2E_OBJS (space-separated), one at a time, saying "deleted
// NAME" once each delete returned, then says "deleting-cont" and deletes
// the transient containers with their objects, open or not (as pdc down
// does), saying "deleted-cont" once that returned. It stops at the first
// error ("error NAME MSG").
func deleterRole(ctx context.Context, c *client.Client, out *bufio.Writer) error {
	say := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
	for _, name := range strings.Fields(os.Getenv("PDC_E2E_OBJS")) {
		o, err := c.OpenObject(ctx, name)
		if err == nil {
			err = o.Delete(ctx)
		}
		if err != nil {
			say("error %s %v", name, err)
			return nil
		}
		say("deleted %s", name)
	}
	say("deleting-cont")
	if _, err := c.DeleteTransient(ctx); err != nil {
		say("error transient %v", err)
		return nil
	}
	say("deleted-cont")
	return nil
}

// goneData is the data of the faulted delete test's object of index i:

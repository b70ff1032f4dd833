package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
)

func init() {
	register(command{name: "fsck", summary: "check the data servers' files: orphaned data, blocks failing their checksums", usage: "[flags]",
		examples: []string{"pdc fsck", "pdc fsck --remove --no-verify"}, run: runFsck})
}

// runFsck has every data server scrub its files and prints what each
// found. It fails if an orphan is left or a block is corrupt, so that a
// script can tell.
func runFsck(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "fsck", "[flags]")
	cf := addClientFlags(e, fs)
	*cf.timeout = 30 * time.Minute
	remove := fs.Bool("remove", false, "delete orphaned files (data of objects whose metadata is gone)")
	noVerify := fs.Bool("no-verify", false, "only look for orphans: do not read every block to check its checksum")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("fsck: takes no arguments: %w", errUsage)
	}
	c, ctx, done, err := cf.connect(ctx)
	if err != nil {
		return fmt.Errorf("fsck: %w", err)
	}
	defer done()
	what := "checking every block"
	if *noVerify {
		what = "looking for orphans"
	}
	st := newStatus(e.stderr, isTerminal(e.stderr), "fsck: "+what+" on the data servers")
	reps, err := c.Scrub(ctx, client.ScrubOptions{Remove: *remove, Verify: !*noVerify, Progress: func(done, total int) {
		st.set("fsck: %s: %d of %s done", what, done, count(total, "data server", "data servers"))
	}})
	st.stop()
	var orphans, left, corrupt uint64
	for _, r := range reps {
		printScrub(e.stdout, r, !*noVerify)
		orphans += r.NOrphans
		corrupt += r.NCorrupt
		for _, o := range r.Orphans {
			if !o.Removed {
				left++
			}
		}
		left += r.NOrphans - uint64(len(r.Orphans))
	}
	if err != nil {
		return fmt.Errorf("fsck: %w", err)
	}
	if left > 0 || corrupt > 0 {
		return fmt.Errorf("fsck: %s left, %s: %w", count(left, "orphaned object", "orphaned objects"), count(corrupt, "corrupt block", "corrupt blocks"), pdc.ErrCorrupt)
	}
	for _, r := range reps {
		if len(r.Errors) > 0 {
			return fmt.Errorf("fsck: %s could not check everything: %s: %w", r.Server.Label(), r.Errors[0], pdc.ErrUnavailable)
		}
	}
	// --no-verify read no block: it cannot say that none is corrupt.
	blocks := "no corrupt blocks"
	if *noVerify {
		blocks = "blocks not checked (--no-verify)"
	}
	fmt.Fprintf(e.stdout, "clean: %s removed, %s\n", count(orphans, "orphaned object", "orphaned objects"), blocks)
	return nil
}

// printScrub prints what one data server's scrub found.
func printScrub(w io.Writer, r client.ScrubReport, verify bool) {
	verified := ""
	if verify {
		verified = fmt.Sprintf(", %s checked", count(r.Verified, "block", "blocks"))
	}
	fmt.Fprintf(w, "%s: %s, %s; %d orphaned, %s%s\n",
		r.Server.Label(), count(r.Objects, "object", "objects"), humanBytes(r.Bytes), r.NOrphans, count(r.NCorrupt, "corrupt block", "corrupt blocks"), verified)
	for _, o := range r.Orphans {
		state := "left (pdc fsck --remove deletes it)"
		if o.Removed {
			state = "removed"
		}
		fmt.Fprintf(w, "orphan: %s: object %d, whose metadata is gone: %s (%s): %s\n",
			r.Server.Label(), o.ID, strings.Join(o.Paths, ", "), humanBytes(o.Bytes), state)
	}
	if n := r.NOrphans - uint64(len(r.Orphans)); n > 0 {
		fmt.Fprintf(w, "orphan: %s: %d more not listed\n", r.Server.Label(), n)
	}
	for _, b := range r.Corrupt {
		name := "an object whose metadata is gone"
		if b.Name != "" {
			name = fmt.Sprintf("object %q", b.Name)
		}
		where := fmt.Sprintf("block %d at offset %d, elements %v to %v", b.Block, b.Offset, b.First, b.Last)
		if b.Region.Ndim() > 0 {
			where += fmt.Sprintf(" of written region %v", b.Region)
		}
		if b.First == nil {
			where = "the whole file"
		}
		fmt.Fprintf(w, "corrupt: %s: %s (id %d): %s: %s: %s\n", r.Server.Label(), name, b.ID, b.Path, where, b.Message)
	}
	if n := r.NCorrupt - uint64(len(r.Corrupt)); n > 0 {
		fmt.Fprintf(w, "corrupt: %s: %d more not listed\n", r.Server.Label(), n)
	}
	for _, m := range r.Errors {
		fmt.Fprintf(w, "not checked: %s: %s\n", r.Server.Label(), m)
	}
}

package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/server"
)

func init() {
	register(command{name: "checkpoint", summary: "checkpoint every metadata server's store, list checkpoints, restore one into a stopped cluster",
		usage: "[VERB] [flags] [NAME]",
		examples: []string{"pdc checkpoint  # the same as pdc checkpoint create",
			"pdc checkpoint restore --datadir pdc_data 20261129T030500.000000000Z"},
		long: `A checkpoint is a consistent copy of each metadata server's store (containers, objects, tags, staged
records), written under its data dir as checkpoints/meta-RANK/NAME with a manifest of its files and their
CRCs. Region data is not in checkpoints. Servers also checkpoint as they stop.`,
		defaultVerb: "create",
		verbs: []verb{
			{name: "create", summary: "checkpoint every metadata server's store now, under one name", usage: "[--name NAME] [flags]",
				examples: []string{"pdc checkpoint create", "pdc checkpoint create --name before-rerun  # kept until removed"}},
			{name: "ls", summary: "list the checkpoints in a data dir, by name", usage: "[--datadir DIR] [flags]",
				examples: []string{"pdc checkpoint ls --datadir pdc_data"}},
			{name: "restore", summary: "put a checkpoint back as the metadata stores of a stopped cluster's data dir", usage: "[--datadir DIR] [flags] NAME",
				examples: []string{"pdc checkpoint restore --datadir pdc_data before-rerun"},
				long: `Every metadata store meta-RANK of the data dir is replaced by checkpoints/meta-RANK/NAME. It refuses,
changing nothing, while any server runs on the data dir (naming its rank and pid), when some store has no
checkpoint of that name, or when a checkpoint fails its manifest's checks (sizes, CRCs, format version).
The stores are copied and checked first, then swapped in together; each store replaced is kept beside it
as meta-RANK.before-restore-TIME. Region data stays as it is. With a data dir per node, restore each.`},
		},
		run: runCheckpoint})
}

func runCheckpoint(ctx context.Context, e *env, args []string) error {
	switch args[0] {
	case "ls":
		return runCheckpointLs(e, args[1:])
	case "restore":
		return runCheckpointRestore(e, args[1:])
	}
	fs := flags(e, "checkpoint create", "[--name NAME] [flags]")
	name := fs.String("name", "", "the checkpoint's name, the same on every metadata server (default: the time, UTC; of those, servers keep the newest 3)")
	cf := addClientFlags(e, fs)
	if help, err := parse(fs, args[1:]); help || err != nil {
		return err
	}
	if err := noArgs(fs, "checkpoint create"); err != nil {
		return err
	}
	if *name == "" {
		*name = time.Now().UTC().Format(metastore.CheckpointTimeLayout)
	} else if err := metastore.ValidCheckpointName(*name); err != nil {
		return fmt.Errorf("checkpoint: --name: %v: %w", err, errUsage)
	}
	c, ctx, done, err := cf.connect(ctx)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	defer done()
	paths, err := c.Checkpoint(ctx, *name)
	if len(paths) > 0 {
		fmt.Fprintf(e.stdout, "checkpoint %s\n", *name)
	}
	for _, s := range c.Servers() {
		if p, ok := paths[s.Rank]; ok {
			fmt.Fprintf(e.stdout, "%s: %s\n", s.Label(), p)
		}
	}
	if err == nil {
		return nil
	}
	// One line, the first server's error: the errors joined were one a
	// line, the first without the command's name.
	first := err
	if j, ok := err.(interface{ Unwrap() []error }); ok && len(j.Unwrap()) > 0 {
		first = j.Unwrap()[0]
		if n := len(j.Unwrap()); n > 1 {
			return fmt.Errorf("checkpoint: %d metadata servers failed; the first: %w", n, first)
		}
	}
	return fmt.Errorf("checkpoint: %w", first)
}

func runCheckpointLs(e *env, args []string) error {
	fs := flags(e, "checkpoint ls", "[--datadir DIR] [flags]")
	dataDir := fs.String("datadir", e.dataDirDefault(), "the cluster's data dir (default $PDC_DATA_LOC or ./pdc_data)")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if err := noArgs(fs, "checkpoint ls"); err != nil {
		return err
	}
	cps, err := server.Checkpoints(nil, *dataDir)
	if err != nil {
		return fmt.Errorf("checkpoint ls: %w", err)
	}
	names := make([]string, 0, len(cps))
	for n := range cps {
		names = append(names, n)
	}
	slices.Sort(names)
	t := newTable(e.stdout, "NAME\tRANKS\tSTATE")
	for _, n := range names {
		var ranks []string
		state := "whole"
		for _, c := range cps[n] {
			ranks = append(ranks, fmt.Sprint(c.Rank))
			if !c.Whole {
				state = "no manifest: cannot be restored"
			}
		}
		t.row("%s\t%s\t%s\n", n, strings.Join(ranks, ","), state)
	}
	t.Flush()
	return nil
}

func runCheckpointRestore(e *env, args []string) error {
	fs := flags(e, "checkpoint restore", "[--datadir DIR] [flags] NAME")
	dataDir := fs.String("datadir", e.dataDirDefault(), "the data dir of the stopped cluster (default $PDC_DATA_LOC or ./pdc_data)")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("checkpoint restore: want the name of one checkpoint (pdc checkpoint ls --datadir %s lists them), got %d arguments: %w", *dataDir, fs.NArg(), errUsage)
	}
	name := fs.Arg(0)
	if err := metastore.ValidCheckpointName(name); err != nil {
		return fmt.Errorf("checkpoint restore: %v: %w", err, errUsage)
	}
	done, err := server.RestoreCheckpoint(nil, *dataDir, name)
	for _, r := range done {
		fmt.Fprintf(e.stdout, "rank %d: restored %s from %s (%s, %s)", r.Rank, r.Store, r.From, count(r.Files, "file", "files"), humanBytes(uint64(r.Bytes)))
		if r.Previous != "" {
			fmt.Fprintf(e.stdout, "; the store it replaced is kept as %s", r.Previous)
		}
		fmt.Fprintln(e.stdout)
	}
	if err != nil {
		return fmt.Errorf("checkpoint restore: %w", err)
	}
	fmt.Fprintf(e.stdout, "restored checkpoint %s into %s; start the cluster on it\n", name, *dataDir)
	return nil
}

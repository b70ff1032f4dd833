package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/limits"
	"github.com/pdcgo/pdc/region"
)

func init() {
	register(command{name: "cont", summary: "containers: make, list, inspect, delete, tag; add objects by reference", usage: "VERB [flags] NAME...",
		examples: []string{"pdc cont create results", "pdc cont ls", "pdc cont rm --recursive results"},
		verbs: []verb{
			{name: "create", summary: "create containers, or find them if they exist", usage: "[--transient] [flags] NAME...",
				examples: []string{"pdc cont create results", "pdc cont create --transient scratch"}},
			{name: "ls", summary: "list every container", usage: "[flags]", examples: []string{"pdc cont ls"}},
			{name: "info", summary: "show containers: id, lifetime, server, objects, tags", usage: "[flags] NAME...",
				examples: []string{"pdc cont info results"}, args: []argKind{argContainer}},
			{name: "rm", summary: "delete containers (one that holds objects only with --recursive, deleting them too)", usage: "[--recursive] [flags] NAME...",
				examples: []string{"pdc cont rm empty", "pdc cont rm --recursive results"}, args: []argKind{argContainer}},
			{name: "tag", summary: "put, get, remove or list a container's tags", usage: tagUsage,
				examples: []string{"pdc cont tag put results run 42 int64", "pdc cont tag get results run", "pdc cont tag ls results"},
				args:     []argKind{argVerb, argContainer, argTag}},
			{name: "add", summary: "make objects members of a container by reference", usage: "[flags] CONTAINER OBJECT...",
				examples: []string{"pdc cont add plots temperature pressure  # members of plots by reference; their home stays where they were created"}, args: []argKind{argContainer, argObject}},
			{name: "remove", summary: "take objects added by reference out of a container again", usage: "[flags] CONTAINER OBJECT...",
				examples: []string{"pdc cont remove plots pressure  # not from its home container: pdc obj rm deletes it"}, args: []argKind{argContainer, argObject}},
		},
		run: runCont})
	register(command{name: "obj", summary: "objects: create, list, inspect, delete, resize, tag", usage: "VERB [flags] NAME...",
		examples: []string{"pdc obj create --cont results --dims 1024x1024 --type float64 temperature", "pdc obj ls --cont results", "pdc obj info temperature"},
		verbs: []verb{
			{name: "create", summary: "create objects in a container", usage: "--cont CONTAINER --dims DIMS [flags] NAME...",
				examples: []string{"pdc obj create --cont results --dims 1024x1024 --type float64 temperature", "pdc obj create --cont results --dims unlimitedx3 --type int32 --storage region events"}},
			{name: "ls", summary: "list a container's objects, in id order", usage: "--cont CONTAINER [flags]",
				examples: []string{"pdc obj ls --cont results", "pdc obj ls --cont results | sort"}},
			{name: "info", summary: "show objects: id, container, dims, type, partition, storage, server", usage: "[flags] NAME...",
				examples: []string{"pdc obj info temperature", "pdc obj info --time-step 3 temperature  # the one created with --time-step 3"}, args: []argKind{argObject}},
			{name: "rm", summary: "delete objects and their data", usage: "[flags] NAME...",
				examples: []string{"pdc obj rm temperature"}, args: []argKind{argObject}},
			{name: "set-dims", summary: "change an object's dims (grow an unlimited first dim)", usage: "[flags] NAME DIMS",
				examples: []string{"pdc obj set-dims events 4096x3"}, args: []argKind{argObject, argNone}},
			{name: "tag", summary: "put, get, remove or list an object's tags", usage: tagUsage,
				examples: []string{"pdc obj tag put temperature units kelvin", "pdc obj tag put temperature step 12 int64", "pdc obj tag get temperature units", "pdc obj tag ls temperature"},
				args:     []argKind{argVerb, argObject, argTag}},
		},
		run: runObj})
}

// clientFlags adds the flags every client command has.
type clientFlags struct {
	tmpdir     *string
	secretFile *string
	timeout    *time.Duration
	pageSize   *int
	verbose    *bool
	e          *env
	name       string // the command, for the verbose log
}

func addClientFlags(e *env, fs *flag.FlagSet) clientFlags {
	return clientFlags{
		tmpdir:     fs.String("tmpdir", e.tmpDirDefault(), "the cluster's tmpdir ($PDC_TMPDIR)"),
		secretFile: secretFileFlag(e, fs),
		timeout:    fs.Duration("timeout", 30*time.Second, "deadline for the whole command (a listing: for each stretch without an item)"),
		pageSize:   fs.Int("page-size", 0, "items asked of each server per page of a listing or container delete (0: the servers' bound)"),
		verbose:    fs.Bool("verbose", false, verboseUsage),
		e:          e, name: fs.Name(),
	}
}

func (f clientFlags) connect(ctx context.Context) (*client.Client, context.Context, context.CancelFunc, error) {
	if f.pageSize != nil && *f.pageSize < 0 {
		// It was taken as 0, the servers' bound, without a word.
		return nil, nil, nil, fmt.Errorf("--page-size %d: want 0 (the servers' bound) or more: %w", *f.pageSize, errUsage)
	}
	ctx, cancel := context.WithTimeout(ctx, *f.timeout)
	ctx, end, err := f.trace(ctx)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	cancel = func(cancel context.CancelFunc) context.CancelFunc { return func() { end(); cancel() } }(cancel)
	opts := withSecretFile([]client.Option{client.WithTmpDir(*f.tmpdir)}, f.secretFile)
	if f.pageSize != nil {
		opts = append(opts, client.WithPageSize(*f.pageSize))
	}
	c, err := client.Connect(ctx, opts...)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return c, ctx, func() { c.CloseContext(ctx); cancel() }, nil
}

// secretFileFlag adds --secret-file, the cluster secret's file, to a
// client command.
func secretFileFlag(e *env, fs interface {
	String(name, value, usage string) *string
}) *string {
	return fs.String("secret-file", e.getenv(client.EnvSecretFile), "the cluster secret's file ($"+client.EnvSecretFile+"; default: the tmpdir's "+cluster.SecretFile+" if there is one)")
}

// withSecretFile adds the --secret-file given, if any, to opts.
func withSecretFile(opts []client.Option, path *string) []client.Option {
	if path != nil && *path != "" {
		opts = append(opts, client.WithSecretFile(*path))
	}
	return opts
}

// errStalled is the cause of a paced context's end.
var errStalled = errors.New("no progress")

// paced returns a context that ends once pace has not been called for d:
// a deadline for each step of a long command rather than for all of it.
// stop releases its timer.
func paced(parent context.Context, d time.Duration) (ctx context.Context, pace, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	t := time.AfterFunc(d, func() {
		cancel(fmt.Errorf("%w for %v (--timeout): %w", errStalled, d, pdc.ErrTimeout))
	})
	return ctx, func() { t.Reset(d) }, func() { t.Stop(); cancel(nil) }
}

// stalled returns the reason ctx, from paced, ended if it did (err is
// then its symptom), or err.
func stalled(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, errStalled) {
		return cause
	}
	return err
}

func sub(args []string, what string, verbs string) (string, []string, error) {
	if len(args) == 0 {
		return "", nil, fmt.Errorf("%s: say what to do (%s): %w", what, verbs, errUsage)
	}
	return args[0], args[1:], nil
}

func runCont(ctx context.Context, e *env, args []string) error {
	verb, rest := args[0], args[1:]
	fs := flags(e, "cont "+verb, "[flags] NAME...")
	cf := addClientFlags(e, fs)
	var transient, recursive *bool
	asJSON := new(bool)
	switch verb {
	case "ls", "info":
		asJSON = jsonFlag(fs)
	case "create":
		transient = fs.Bool("transient", false, "the containers are transient (deleted by pdc down), not persistent")
	case "rm":
		recursive = fs.Bool("recursive", false, "delete a container that holds objects, and its objects")
	}
	if help, err := parse(fs, rest); help || err != nil {
		return err
	}
	names := fs.Args()
	if err := checkTagArgs("cont", verb, names); err != nil {
		return err
	}
	if verb == "ls" {
		if err := noArgs(fs, "cont ls"); err != nil {
			return err
		}
	}
	base := ctx
	c, ctx, done, err := cf.connect(ctx)
	if err != nil {
		return fmt.Errorf("cont %s: %w", verb, err)
	}
	defer done()
	switch verb {
	case "create":
		return contCreate(ctx, e, c, names, *transient)
	case "ls":
		return contLs(ctx, e, c, *asJSON)
	case "info":
		return contInfo(ctx, e, c, names, *asJSON)
	case "rm":
		return contRm(base, e, c, names, *cf.timeout, *recursive)
	case "tag":
		return runTag(ctx, e, names, func(ctx context.Context, name string) (tagger, error) {
			return c.OpenContainer(ctx, name)
		}, "cont")
	case "add", "remove":
		return contMembers(ctx, e, c, verb, names)
	}
	return fmt.Errorf("cont: unknown verb %q: %w", verb, errUsage)
}

// contCreate creates the containers names (or finds them).
func contCreate(ctx context.Context, e *env, c *client.Client, names []string, transient bool) error {
	if len(names) == 0 {
		return fmt.Errorf("cont create: give container names: %w", errUsage)
	}
	life := client.Persistent
	if transient {
		life = client.Transient
	}
	for _, n := range names {
		ct, created, err := c.CreateContainer(ctx, n, life)
		if err != nil {
			return err
		}
		state := "created"
		if !created {
			state = "exists"
		}
		fmt.Fprintf(e.stdout, "%s\t%d\t%s\n", n, ct.ID(), state)
	}
	return nil
}

// contLs lists every container.
func contLs(ctx context.Context, e *env, c *client.Client, asJSON bool) error {
	if asJSON {
		out := newJSONLines(e.stdout)
		for ci, err := range c.AllContainers(ctx) {
			if err != nil {
				return err
			}
			if err := out.put(newContainerJSON(ci)); err != nil {
				return err
			}
		}
		return nil
	}
	tw := newTable(e.stdout, "NAME\tID\tLIFETIME\tSERVER\tCREATED")
	defer tw.Flush()
	for ci, err := range c.AllContainers(ctx) {
		if err != nil {
			return err
		}
		life := lifetimeName(ci.Lifetime)
		if ci.Deleting {
			life += " (being deleted)"
		}
		tw.row("%s\t%d\t%s\t%d\t%s\n", ci.Name, ci.ID, life, ci.Server, ci.Created.Format(time.RFC3339))
	}
	return nil
}

// contRm deletes the containers names. By name, so that a delete that
// stopped half-way, whose container no longer opens, is finished. A
// container that holds objects is deleted only if recursive: its objects
// go with it. timeout bounds each page of members deleted, not the whole
// delete: a container of a million objects takes longer than 30 s.
func contRm(base context.Context, e *env, c *client.Client, names []string, timeout time.Duration, recursive bool) error {
	if len(names) == 0 {
		return fmt.Errorf("cont rm: give container names: %w", errUsage)
	}
	if !recursive {
		if err := refuseNonEmpty(base, c, names, timeout); err != nil {
			return err
		}
	}
	for _, n := range names {
		dctx, pace, stop := paced(base, timeout)
		var members uint64
		err := c.DeleteContainer(dctx, n, client.OnPage(func(k uint64) { members += k; pace() }))
		stop()
		if err != nil {
			return stalled(dctx, err)
		}
		fmt.Fprintf(e.stdout, "deleted container %s and its %d %s\n", n, members, plural(members, "object", "objects"))
	}
	return nil
}

// refuseNonEmpty fails, naming them and their counts, if any of the
// containers names holds objects. One whose delete stopped half-way is
// not refused: its delete was asked for already.
func refuseNonEmpty(ctx context.Context, c *client.Client, names []string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var full []string
	for _, n := range names {
		ct, err := c.OpenContainer(ctx, n, client.EvenBeingDeleted())
		if err != nil {
			return fmt.Errorf("cont rm: %w", err)
		}
		if ct.Info().Deleting {
			continue
		}
		k, err := ct.Count(ctx)
		if err != nil {
			return fmt.Errorf("cont rm: count the objects of %s: %w", n, err)
		}
		if k > 0 {
			full = append(full, fmt.Sprintf("%s holds %d %s", n, k, plural(k, "object", "objects")))
		}
	}
	if len(full) > 0 {
		// Its members by reference are counted too, and --recursive does
		// not delete them: saying it deletes "the objects" warned of a
		// loss that does not happen.
		return fmt.Errorf("cont rm: %s; nothing deleted: pdc cont rm --recursive deletes the container with the objects created in it (objects added by reference stay in their own): %w",
			strings.Join(full, ", "), pdc.ErrInvalid)
	}
	return nil
}

// contInfo prints what the containers names are, even those being
// deleted.
func contInfo(ctx context.Context, e *env, c *client.Client, names []string, asJSON bool) error {
	if len(names) == 0 {
		return fmt.Errorf("cont info: give container names: %w", errUsage)
	}
	for _, n := range names {
		ct, err := c.OpenContainer(ctx, n, client.EvenBeingDeleted())
		if err != nil {
			return err
		}
		nobj, err := ct.Count(ctx)
		if err != nil {
			return err
		}
		tags, err := ct.Tags(ctx)
		if err != nil {
			return err
		}
		i := ct.Info()
		if asJSON {
			j := newContainerJSON(i)
			if tags == nil {
				tags = []string{}
			}
			j.Objects, j.Tags = &nobj, &tags
			if err := newJSONLines(e.stdout).put(j); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(e.stdout, "name:     %s\nid:       %d\nlifetime: %s\nserver:   rank %d\ncreated:  %s\nobjects:  %d\ntags:     %s\n",
			i.Name, i.ID, lifetimeName(i.Lifetime), i.Server, i.Created.Format(time.RFC3339), nobj, strings.Join(tags, ", "))
		if i.Deleting {
			fmt.Fprintf(e.stdout, "state:    being deleted: its delete stopped half-way; pdc cont rm %s finishes it\n", i.Name)
		}
	}
	return nil
}

// contMembers runs add CONT OBJ... (the objects, time step 0, become
// members by reference) and remove (takes added ones out again).
func contMembers(ctx context.Context, e *env, c *client.Client, verb string, names []string) error {
	if len(names) < 2 {
		return fmt.Errorf("cont %s: give a container and object names: %w", verb, errUsage)
	}
	ct, err := c.OpenContainer(ctx, names[0])
	if err != nil {
		return err
	}
	objs, err := c.OpenObjects(ctx, names[1:])
	ids := make([]uint64, 0, len(objs))
	for _, o := range objs {
		if o != nil {
			ids = append(ids, o.ID())
			o.Close(ctx)
		}
	}
	if err != nil {
		return err
	}
	change, done := ct.AddObjects, "added %s to container %s\n"
	if verb == "remove" {
		change, done = ct.RemoveObjects, "removed %s from container %s\n"
	}
	if err := change(ctx, ids...); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, done, count(len(ids), "object", "objects"), ct.Name())
	return nil
}

func lifetimeName(l client.Lifetime) string {
	if l == client.Transient {
		return "transient"
	}
	return "persistent"
}

// parseDims reads dims written 1024x1024 or 1024,1024 (as --region
// separates dims); a "*" or "unlimited" first dim is Unlimited.
func parseDims(s string) ([]uint64, error) {
	var dims []uint64
	sep := "x"
	if strings.Contains(s, ",") {
		sep = ","
	}
	for i, p := range strings.Split(s, sep) {
		if i == 0 && (p == "*" || p == "unlimited") {
			dims = append(dims, client.Unlimited)
			continue
		}
		d, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("dims %q: %q is not a size; write dims as 1024x1024 or 1024,1024", s, p)
		}
		if d == client.Unlimited {
			// The C API's PDC_SIZE_UNLIMITED, but spelled as a number it
			// is a typo more likely than a wish.
			return nil, fmt.Errorf("dims %q: dim %d is 2^64-1, which would mean unlimited: write \"unlimited\" for a first dim that can grow", s, i)
		}
		dims = append(dims, d)
	}
	return dims, nil
}

func formatDims(dims []uint64) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		if d == client.Unlimited {
			parts[i] = "unlimited"
		} else {
			parts[i] = strconv.FormatUint(d, 10)
		}
	}
	return strings.Join(parts, "x")
}

func runObj(ctx context.Context, e *env, args []string) error {
	verb, rest := args[0], args[1:]
	fs := flags(e, "obj "+verb, "[flags] NAME...")
	cf := addClientFlags(e, fs)
	var f objFlags
	var cont *string
	asJSON := new(bool)
	switch verb {
	case "create":
		cont = fs.String("cont", "", "the container to create the objects in")
		fs.StringVar(&f.dims, "dims", "", `dims such as 1024x1024 ("unlimited" first dim allowed)`)
		fs.StringVar(&f.typ, "type", "float32", "element type")
		fs.StringVar(&f.part, "partition", "object-static", "object-static, region-static, region-dynamic or region-local (or 0-3)")
		fs.StringVar(&f.storage, "storage", "offset", "how data servers store the data: offset (row-major file) or region (log of written regions)")
		fs.Var(&f.uid, "user-id", "user `id` (0 to 4294967295)")
		fs.StringVar(&f.app, "app", "", "app name")
	case "info", "rm", "set-dims", "tag":
		// Objects of one name and time step differ by user id and app
		// name; the server refuses to guess between them.
		fs.Var(&f.uid, "user-id", "the object's user `id`, for a name that several objects share: with --app, opens exactly that one")
		fs.StringVar(&f.app, "app", "", "the object's app name, for a name that several objects share: with --user-id, opens exactly that one")
	case "ls":
		cont = fs.String("cont", "", "the container whose objects to list")
	}
	if verb == "ls" || verb == "info" {
		asJSON = jsonFlag(fs)
	}
	if verb != "ls" {
		fs.Var(&f.ts, "time-step", "time `step` (0 to 4294967295)")
	}
	if help, err := parse(fs, rest); help || err != nil {
		return err
	}
	names := fs.Args()
	var props client.ObjectProps
	switch verb {
	case "create":
		if *cont == "" || f.dims == "" || len(names) == 0 {
			return fmt.Errorf("obj create: give --cont, --dims and object names: %w", errUsage)
		}
		// Before connecting: a bad value is the user's, whether or not a
		// cluster is there to ask.
		var err error
		if props, err = f.props(); err != nil {
			return err
		}
	case "ls":
		if *cont == "" {
			return fmt.Errorf("obj ls: give --cont: %w", errUsage)
		}
		if err := noArgs(fs, "obj ls"); err != nil {
			return err
		}
	case "info", "rm", "set-dims":
		if len(names) == 0 || verb == "set-dims" && len(names) != 2 {
			return fmt.Errorf("obj %s: give an object name%s: %w", verb, map[bool]string{true: " and dims", false: ""}[verb == "set-dims"], errUsage)
		}
	case "tag":
		if err := checkTagArgs("obj", verb, names); err != nil {
			return err
		}
	}
	open := openOptions(fs, f.ts, f.uid, f.app)
	base := ctx
	c, ctx, done, err := cf.connect(ctx)
	if err != nil {
		return fmt.Errorf("obj %s: %w", verb, err)
	}
	defer done()
	switch verb {
	case "create":
		return objCreate(ctx, e, c, *cont, names, props)
	case "ls":
		return objLs(ctx, base, e, c, *cont, *cf.timeout, *asJSON)
	case "info", "rm", "set-dims":
		return objEach(ctx, e, c, verb, names, open, *asJSON)
	case "tag":
		return runTag(ctx, e, names, func(ctx context.Context, name string) (tagger, error) {
			return c.OpenObject(ctx, name, open...)
		}, "obj")
	}
	return fmt.Errorf("obj: unknown verb %q: %w", verb, errUsage)
}

// openOptions opens the object of time step ts and, if --user-id or
// --app was given, exactly the one of that user id and app name: objects
// of one name and time step differ by them, and without them the server
// refuses to guess ("open it with both").
func openOptions(fs *flag.FlagSet, ts, uid uint32Flag, app string) []client.OpenOption {
	open := []client.OpenOption{client.AtTimeStep(uint32(ts))}
	given := false
	fs.Visit(func(fl *flag.Flag) { given = given || fl.Name == "user-id" || fl.Name == "app" })
	if given {
		open = append(open, client.WithIdentity(uint32(uid), app))
	}
	return open
}

// objFlags are obj create's flags.
type objFlags struct {
	dims, typ, part, storage, app string
	ts, uid                       uint32Flag
}

// uint32Flag is a flag of 0 to 2^32-1, the range of a time step or user
// id: a larger value is refused rather than wrapped, which would name the
// object of another time step (pdc obj rm --time-step 4294967296 deleted
// time step 0's).
type uint32Flag uint32

func (f *uint32Flag) String() string { return strconv.FormatUint(uint64(*f), 10) }

func (f *uint32Flag) Set(s string) error {
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return fmt.Errorf("want a whole number from 0 to %d", uint32(math.MaxUint32))
	}
	*f = uint32Flag(v)
	return nil
}

// props are the properties obj create's flags give, or a usage error
// naming the flag's value that is wrong.
func (f objFlags) props() (client.ObjectProps, error) {
	d, err := parseDims(f.dims)
	if err != nil {
		return client.ObjectProps{}, fmt.Errorf("obj create: %v: %w", err, errUsage)
	}
	t, err := region.ParseType(f.typ)
	if err != nil {
		return client.ObjectProps{}, fmt.Errorf("obj create: %v: %w", err, errUsage)
	}
	p, err := parsePartition(f.part)
	if err != nil {
		return client.ObjectProps{}, fmt.Errorf("obj create: %v: %w", err, errUsage)
	}
	st, err := parseStorage(f.storage)
	if err != nil {
		return client.ObjectProps{}, fmt.Errorf("obj create: %v: %w", err, errUsage)
	}
	return client.ObjectProps{Dims: d, Type: t, Partition: p, Storage: st, TimeStep: uint32(f.ts), UserID: uint32(f.uid), AppName: f.app}, nil
}

// objCreate creates the objects names in container cont.
func objCreate(ctx context.Context, e *env, c *client.Client, cont string, names []string, props client.ObjectProps) error {
	ct, err := c.OpenContainer(ctx, cont)
	if err != nil {
		return err
	}
	specs := make([]client.ObjectSpec, len(names))
	for i, n := range names {
		specs[i] = client.ObjectSpec{Name: n, Props: props.Clone()}
	}
	objs, err := ct.CreateObjects(ctx, specs)
	for _, o := range objs {
		if o != nil {
			fmt.Fprintf(e.stdout, "%s\t%d\n", o.Name(), o.ID())
			o.Close(ctx)
		}
	}
	return err
}

// objLs lists the objects of container cont, streamed in id order, a
// page per server at a time: a container of millions lists in bounded
// memory (sort by name with sort(1)). timeout bounds each stretch without
// an object, not the whole listing: a million objects take longer than
// 30 s to print.
func objLs(ctx, base context.Context, e *env, c *client.Client, cont string, timeout time.Duration, asJSON bool) error {
	ct, err := c.OpenContainer(ctx, cont)
	if err != nil {
		return err
	}
	row := func(o client.ObjectInfo) error { return newJSONLines(e.stdout).put(newObjectJSON(o)) }
	if !asJSON {
		tw := newTable(e.stdout, objectHeader)
		defer tw.Flush()
		row = func(o client.ObjectInfo) error { printObjectRow(tw, o); return nil }
	}
	lctx, pace, stop := paced(base, timeout)
	defer stop()
	for o, err := range ct.All(lctx) {
		if err != nil {
			return stalled(lctx, err)
		}
		pace()
		if err := row(o); err != nil {
			return err
		}
	}
	return nil
}

// objEach runs info or rm on each object of names, or set-dims on
// names[0] with the dims names[1], opened with open (its time step, and
// user id and app name if given).
func objEach(ctx context.Context, e *env, c *client.Client, verb string, names []string, open []client.OpenOption, asJSON bool) error {
	targets := names
	if verb == "set-dims" {
		targets = names[:1]
	}
	for _, n := range targets {
		o, err := c.OpenObject(ctx, n, open...)
		if err != nil {
			return err
		}
		switch verb {
		case "rm":
			err = o.Delete(ctx)
			if err == nil {
				fmt.Fprintf(e.stdout, "deleted object %s\n", n)
			}
		case "set-dims":
			var d []uint64
			if d, err = parseDims(names[1]); err != nil {
				o.Close(ctx)
				return fmt.Errorf("obj set-dims: %v: %w", err, errUsage)
			}
			err = o.SetDims(ctx, d)
			if err == nil {
				// As rm and tag put say what they did; it said nothing.
				fmt.Fprintf(e.stdout, "set dims of object %s to %s\n", n, formatDims(d))
			}
			o.Close(ctx)
		case "info":
			if asJSON {
				err = newJSONLines(e.stdout).put(newObjectJSON(o.Info()))
			} else {
				printObject(e.stdout, o.Info())
			}
			o.Close(ctx)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// printObjects prints objects in a table.
func printObjects(w io.Writer, objs []client.ObjectInfo) {
	tw := newTable(w, objectHeader)
	for _, o := range objs {
		printObjectRow(tw, o)
	}
	tw.Flush()
}

// shownName is a name as a listing shows it: quoted if it holds what
// would break the listing's lines or columns (names stored before
// servers refused them).
func shownName(n string) string {
	if limits.Name("", n, len(n)) != nil {
		return strconv.Quote(n)
	}
	return n
}

const objectHeader = "NAME\tID\tDIMS\tTYPE\tTIME STEP\tSERVER"

func printObjectRow(tw *table, o client.ObjectInfo) {
	tw.row("%s\t%d\t%s\t%s\t%d\t%d\n", shownName(o.Name), o.ID, formatDims(o.Props.Dims), o.Props.Type, o.Props.TimeStep, o.Server)
}

// tableBlock is how many rows a table aligns at a time: a listing of
// millions is printed in blocks instead of held whole.
const tableBlock = 4096

// table prints rows in aligned columns, tableBlock rows at a time.
type table struct {
	tw   *tabwriter.Writer
	rows int
}

func newTable(w io.Writer, header string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	fmt.Fprintln(t.tw, header)
	return t
}

func (t *table) row(format string, args ...any) {
	fmt.Fprintf(t.tw, format, args...)
	if t.rows++; t.rows%tableBlock == 0 {
		t.tw.Flush()
	}
}

// Flush prints the rows not printed yet.
func (t *table) Flush() { t.tw.Flush() }

func printObject(w io.Writer, o client.ObjectInfo) {
	fmt.Fprintf(w, "name:        %s\nid:          %d\ncontainer:   %d\ndims:        %s\ntype:        %s\npartition:   %s\nstorage:     %s\nconsistency: %d\ntime step:   %d\nuser id:     %d\napp:         %s\nserver:      rank %d\ncreated:     %s\n",
		o.Name, o.ID, o.ContainerID, formatDims(o.Props.Dims), o.Props.Type, o.Props.Partition, o.Props.Storage, o.Props.Consistency,
		o.Props.TimeStep, o.Props.UserID, o.Props.AppName, o.Server, o.Created.Format(time.RFC3339))
}

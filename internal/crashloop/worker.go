package crashloop

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// WorkerConfig is what one client process of a cycle does.
type WorkerConfig struct {
	// Log is the op log this process appends to. Required.
	Log string
	// Proc numbers the process within its cycle, 0 to 14 (15 is the
	// driver's read-back).
	Proc int
	// Cycle numbers the cycle, from 1.
	Cycle int
	// Seed seeds the choice of operations.
	Seed uint64
	// Container holds the objects; it exists.
	Container string
	// Objects are the objects known to exist, to overwrite and tag.
	Objects []string
	// Create is how many objects the process may create.
	Create int
	// DynamicOverwrites lets region-dynamic and region-local objects be
	// overwritten; without it each of their cells is written at most
	// once, by the process that created the object (see
	// DynamicOverwritesSafe).
	DynamicOverwrites bool
	// Ready, if set, is called once the process can work (it has
	// opened the container), so that the faults of a cycle land on
	// working clients.
	Ready func()
}

// DynamicOverwritesSafe is whether an overwrite of a region-dynamic or
// region-local object may be interrupted by a fault without losing what
// was acknowledged before, the default of Config.DynamicOverwrites. It
// may since issue 25 case 1 was fixed (an overwrite goes where the data
// it replaces is, docs/design/0012); before, a read-back after a killed
// overwrite read zeros. Crash loops without it write each cell of such
// objects at most once.
var DynamicOverwritesSafe = true

// Shapes of the objects created: 1, 2 and 3 dims, 1 to 4 blocks of 4 KiB.
var shapes = [][]uint64{{512}, {16, 64}, {8, 8, 32}}

// The partitions and storage modes objects are created in, as the client
// numbers them.
var (
	partitions = []client.Partition{client.ObjectStatic, client.RegionStatic, client.RegionDynamic, client.RegionLocal}
	storages   = []client.Storage{client.StorageByOffset, client.StorageByRegion}
)

// opTimeout bounds one operation, so that a worker whose server died
// goes on with others.
const opTimeout = 20 * time.Second

type worker struct {
	cfg   WorkerConfig
	c     *client.Client
	log   *opLog
	r     *rand.Rand
	ct    *client.Container
	seq   uint64
	names []string                  // the objects to work on: cfg.Objects and those created
	objs  map[string]*client.Object // opened
	// gone are the names this process last saw deleted (by its delete, or
	// an open that did not find them), to create again.
	gone map[string]bool
	// next is, per region-dynamic or -local object this process created,
	// the first row (of dim 0) it has not written; without
	// DynamicOverwrites these are the only such objects it writes.
	next map[string]uint64
	// puts are the tag puts this process tried, for its searches to look
	// for (and around).
	puts []tagPut
}

type tagPut struct {
	tag string
	wid uint64
}

// Work runs the mixed workload of one client process with c until ctx
// ends or the process is killed, logging each operation to cfg.Log. It
// returns only for ctx's end or an error of its own (the log).
func Work(ctx context.Context, c *client.Client, cfg WorkerConfig) error {
	if cfg.Proc < 0 || cfg.Proc > 14 {
		return fmt.Errorf("crashloop worker: process %d out of 0-14: %w", cfg.Proc, pdc.ErrInvalid)
	}
	l, err := createLog(cfg.Log, cfg.Proc)
	if err != nil {
		return err
	}
	defer l.close()
	w := &worker{cfg: cfg, c: c, log: l, r: rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Proc))),
		names: append([]string(nil), cfg.Objects...), objs: map[string]*client.Object{}, gone: map[string]bool{},
		next: map[string]uint64{}}
	for ctx.Err() == nil {
		if err := w.step(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (w *worker) nextWID() uint64 {
	w.seq++
	return writeID(w.cfg.Cycle, w.cfg.Proc, w.seq)
}

// step does one operation; it returns only the log's errors.
func (w *worker) step(ctx context.Context) error {
	if w.seq >= maxSeq-2 {
		<-ctx.Done()
		return nil
	}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if w.ct == nil {
		ct, err := w.c.OpenContainer(octx, w.cfg.Container)
		if err != nil {
			return nil // a server is down; try again
		}
		w.ct = ct
		if w.cfg.Ready != nil {
			w.cfg.Ready()
		}
	}
	p := w.r.IntN(100)
	switch {
	case len(w.names) == 0 || (p < 12 && w.cfg.Create > 0):
		return w.create(octx)
	case p < 16 && len(w.gone) > 0:
		return w.recreate(octx)
	case p < 44:
		return w.write(octx)
	case p < 56:
		return w.read(octx)
	case p < 72:
		return w.putTag(octx)
	case p < 77:
		return w.delTag(octx)
	case p < 80:
		return w.getTag(octx)
	case p < 87:
		return w.search(octx)
	case p < 90:
		return list(octx, w.ct, w.log)
	case p < 96:
		return w.setDims(octx)
	default:
		return w.deleteObject(octx)
	}
}

func (w *worker) create(ctx context.Context) error {
	if w.cfg.Create <= 0 {
		<-ctx.Done() // nothing to work on
		return nil
	}
	w.cfg.Create--
	name := objectName(w.nextWID(), w.r.IntN(len(shapes)), w.r.IntN(len(partitions)), w.r.IntN(len(storages)))
	w.names = append(w.names, name)
	return w.createNamed(ctx, name)
}

// recreate creates again, as it was created first, an object this
// process saw deleted.
func (w *worker) recreate(ctx context.Context) error {
	names := sortedKeys(w.gone)
	return w.createNamed(ctx, names[w.r.IntN(len(names))])
}

func (w *worker) createNamed(ctx context.Context, name string) error {
	props, ok := propsOfName(name)
	if !ok {
		delete(w.gone, name)
		return nil
	}
	n, err := w.log.invoke(Record{Kind: kindCreate, Obj: name, Props: &props})
	if err != nil {
		return err
	}
	o, err := w.ct.CreateObject(ctx, name, client.ObjectProps{Dims: props.Dims, Type: region.Uint64,
		Partition: partitions[props.Partition], Storage: storages[props.Storage]})
	if err != nil {
		return w.log.fail(n, err)
	}
	w.objs[name] = o
	delete(w.gone, name)
	if dynamic(partitions[props.Partition]) {
		if _, seen := w.next[name]; !seen && !w.cfg.DynamicOverwrites {
			w.next[name] = 0
		}
	}
	return w.log.done(n, Record{ID: o.ID()})
}

// object picks an object, opening it (an existence read) if need be; nil
// if that failed. dims are the handle's, which another process's set
// dims may have made stale.
func (w *worker) object(ctx context.Context) (*client.Object, []uint64, string, error) {
	name := w.names[w.r.IntN(len(w.names))]
	if o := w.objs[name]; o != nil {
		return o, o.Info().Props.Dims, name, nil
	}
	n, err := w.log.invoke(Record{Kind: kindOpen, Obj: name})
	if err != nil {
		return nil, nil, "", err
	}
	o, err := w.c.OpenObject(ctx, name)
	switch {
	case errors.Is(err, pdc.ErrNotFound):
		w.gone[name] = true
		return nil, nil, "", w.log.done(n, Record{Found: false})
	case err != nil:
		return nil, nil, "", w.log.fail(n, err)
	}
	dims := o.Info().Props.Dims
	w.objs[name] = o
	delete(w.gone, name)
	return o, dims, name, w.log.done(n, Record{Found: true, ID: o.ID(), Dims: dims})
}

// failed logs the failure of operation n on object name and drops the
// handle, to be opened again: the object may be deleted, and while its
// server is down, each operation tried through the handle would be one
// more that may take effect at any moment, for the checker to place
// (an open that fails is not an update).
func (w *worker) failed(n uint64, name string, err error) error {
	delete(w.objs, name)
	return w.log.fail(n, err)
}

// once reports whether each cell of o is written at most once, by the
// process that created it (see WorkerConfig.DynamicOverwrites): such an
// object is neither deleted nor resized.
func (w *worker) once(o *client.Object) bool {
	return !w.cfg.DynamicOverwrites && dynamic(o.Info().Props.Partition)
}

// box picks a box in dims: the whole object one time in five, else any
// non-empty box, of at most limit cells if limit > 0.
func (w *worker) box(dims []uint64, limit uint64) region.Box {
	b := region.Shape(dims...).Clone()
	if limit == 0 && w.r.IntN(5) == 0 {
		return b
	}
	for i, d := range dims {
		b.Off[i] = w.r.Uint64N(d)
		b.Size[i] = 1 + w.r.Uint64N(d-b.Off[i])
	}
	for i := 0; limit > 0 && b.Volume() > limit; i = (i + 1) % len(dims) {
		b.Size[i] = max(1, b.Size[i]/2)
	}
	return b
}

func dynamic(p client.Partition) bool { return p == client.RegionDynamic || p == client.RegionLocal }

func (w *worker) write(ctx context.Context) error {
	o, dims, name, err := w.object(ctx)
	if o == nil || err != nil {
		return err
	}
	once := w.once(o)
	if _, own := w.next[name]; once && (!own || w.next[name] == dims[0]) {
		return w.readObject(ctx, o, dims, name)
	}
	props, ok := propsOfName(name)
	if !ok || len(props.Dims) != len(dims) {
		return nil
	}
	span := spanDims(&props)
	// One write done at once, or two started together and waited
	// together.
	k := 1 + w.r.IntN(2)
	var ts []*client.Transfer
	var ns []uint64
	for range k {
		b := w.box(dims, 0)
		if once {
			// The next rows not yet written, whole.
			if w.next[name] == dims[0] {
				break
			}
			b = region.Shape(dims...).Clone()
			b.Off[0] = w.next[name]
			b.Size[0] = min(1+w.r.Uint64N(max(dims[0]/4, 1)), dims[0]-b.Off[0])
			w.next[name] += b.Size[0]
		}
		wid := w.nextWID()
		buf := make([]byte, 8*b.Volume())
		fillCells(buf, span, b, wid)
		n, err := w.log.invoke(Record{Kind: kindWrite, Obj: name, ID: o.ID(), Box: &b, WID: wid})
		if err != nil {
			return err
		}
		if k == 1 {
			// Alone: one request that the server answers once stored
			// (Object.Write, Transfer.Do).
			if err := o.Write(ctx, b, buf); err != nil {
				return w.failed(n, name, err)
			}
			return w.log.done(n, Record{})
		}
		t, err := o.StartWrite(ctx, b, buf)
		if err != nil {
			if err := w.failed(n, name, err); err != nil {
				return err
			}
			continue
		}
		ts, ns = append(ts, t), append(ns, n)
	}
	for i, t := range ts {
		if err := t.Wait(ctx); err != nil {
			if err := w.failed(ns[i], name, err); err != nil {
				return err
			}
			continue
		}
		if err := w.log.done(ns[i], Record{}); err != nil {
			return err
		}
	}
	return nil
}

func (w *worker) read(ctx context.Context) error {
	o, dims, name, err := w.object(ctx)
	if o == nil || err != nil {
		return err
	}
	return w.readObject(ctx, o, dims, name)
}

func (w *worker) readObject(ctx context.Context, o *client.Object, dims []uint64, name string) error {
	b := w.box(dims, 256)
	buf := make([]byte, 8*b.Volume())
	n, err := w.log.invoke(Record{Kind: kindRead, Obj: name, ID: o.ID(), Box: &b})
	if err != nil {
		return err
	}
	if err := o.Read(ctx, b, buf); err != nil {
		// Servers die under the workers: a failed read observed nothing.
		return w.failed(n, name, err)
	}
	return w.log.done(n, Record{Vals: cellsOf(buf)})
}

func (w *worker) putTag(ctx context.Context) error {
	if w.r.IntN(4) == 0 {
		return w.putTags(ctx)
	}
	o, _, name, err := w.object(ctx)
	if o == nil || err != nil {
		return err
	}
	tag := tagNames[w.r.IntN(len(tagNames))]
	wid := w.nextWID()
	n, err := w.log.invoke(Record{Kind: kindPutTag, Obj: name, ID: o.ID(), Tag: tag, WID: wid})
	if err != nil {
		return err
	}
	w.puts = append(w.puts, tagPut{tag, wid})
	if err := o.PutTag(ctx, tag, tagValue(tag, wid)); err != nil {
		return w.failed(n, name, err)
	}
	return w.log.done(n, Record{})
}

// putTags puts a tag on each of up to 6 objects in one batch
// (Client.PutTags: one request per metadata server, and one commit and
// index record there for all of its objects). If it fails, which of the
// puts took effect is not known: none is acknowledged.
func (w *worker) putTags(ctx context.Context) error {
	var puts []client.TagPut
	var ns []uint64
	var names []string
	for range 2 + w.r.IntN(5) {
		o, _, name, err := w.object(ctx)
		if err != nil {
			return err
		}
		if o == nil || slices.Contains(names, name) {
			continue
		}
		tag := tagNames[w.r.IntN(len(tagNames))]
		wid := w.nextWID()
		n, err := w.log.invoke(Record{Kind: kindPutTag, Obj: name, ID: o.ID(), Tag: tag, WID: wid})
		if err != nil {
			return err
		}
		w.puts = append(w.puts, tagPut{tag, wid})
		puts = append(puts, client.TagPut{Object: o, Name: tag, Value: tagValue(tag, wid)})
		ns, names = append(ns, n), append(names, name)
	}
	if len(puts) == 0 {
		return nil
	}
	if err := w.c.PutTags(ctx, puts); err != nil {
		for i, n := range ns {
			if err := w.failed(n, names[i], err); err != nil {
				return err
			}
		}
		return nil
	}
	for _, n := range ns {
		if err := w.log.done(n, Record{}); err != nil {
			return err
		}
	}
	return nil
}

func (w *worker) delTag(ctx context.Context) error {
	o, _, name, err := w.object(ctx)
	if o == nil || err != nil {
		return err
	}
	tag := tagNames[w.r.IntN(len(tagNames))]
	n, err := w.log.invoke(Record{Kind: kindDelTag, Obj: name, ID: o.ID(), Tag: tag})
	if err != nil {
		return err
	}
	if err := o.DeleteTag(ctx, tag); err != nil {
		return w.failed(n, name, err)
	}
	return w.log.done(n, Record{})
}

func (w *worker) getTag(ctx context.Context) error {
	o, _, name, err := w.object(ctx)
	if o == nil || err != nil {
		return err
	}
	tag := tagNames[w.r.IntN(len(tagNames))]
	return getTag(ctx, w.log, o, name, tag)
}

// getTag reads tag of o (object name) and logs it.
func getTag(ctx context.Context, l *opLog, o *client.Object, name, tag string) error {
	n, err := l.invoke(Record{Kind: kindGetTag, Obj: name, ID: o.ID(), Tag: tag})
	if err != nil {
		return err
	}
	v, err := o.GetTag(ctx, tag)
	if errors.Is(err, pdc.ErrNotFound) {
		return l.done(n, Record{})
	}
	if err != nil {
		return l.fail(n, err)
	}
	wid, err := tagWID(tag, v)
	if err != nil {
		return l.fail(n, err)
	}
	return l.done(n, Record{WID: wid})
}

// search looks for one of the tag values this process put (or, 1 in 8,
// one nobody did), by one of the forms of searchFor.
func (w *worker) search(ctx context.Context) error {
	var spec SearchSpec
	if len(w.puts) == 0 || w.r.IntN(8) == 0 {
		wid := writeID(1+w.r.IntN(w.cfg.Cycle), w.r.IntN(16), 1+w.r.Uint64N(1024))
		spec = searchFor(w.r, tagNames[w.r.IntN(len(tagNames))], wid)
	} else {
		p := w.puts[len(w.puts)-1-w.r.IntN(min(len(w.puts), 16))]
		spec = searchFor(w.r, p.tag, p.wid)
	}
	return search(ctx, w.c, w.log, spec)
}

// list lists ct's objects and logs what it found.
func list(ctx context.Context, ct *client.Container, l *opLog) error {
	n, err := l.invoke(Record{Kind: kindList})
	if err != nil {
		return err
	}
	infos, err := ct.Objects(ctx)
	if err != nil {
		return l.fail(n, err)
	}
	r := Record{Listed: make([]Listed, len(infos))}
	for i, info := range infos {
		r.Listed[i] = Listed{Name: info.Name, ID: info.ID, Dims: info.Props.Dims}
	}
	return l.done(n, r)
}

// search runs spec and logs it.
func search(ctx context.Context, c *client.Client, l *opLog, spec SearchSpec) error {
	n, err := l.invoke(Record{Kind: kindSearch, Search: &spec})
	if err != nil {
		return err
	}
	var opts []client.QueryOption
	if spec.Scan {
		opts = append(opts, client.ScanOnly())
	}
	if spec.Names {
		opts = append(opts, client.WithNames())
	}
	ms, err := c.Query(ctx, spec.Query(), opts...)
	if err != nil {
		return l.fail(n, err)
	}
	r := Record{Hits: make([]uint64, len(ms))}
	for i, m := range ms {
		r.Hits[i] = m.ID
		if spec.Names {
			r.Names = append(r.Names, m.Name)
		}
	}
	return l.done(n, r)
}

// setDims grows or shrinks the first dim of an object, between 1 and
// maxGrowth times its size at create, and one time in three each other
// dim, between 1 and trailingGrowth times its own.
func (w *worker) setDims(ctx context.Context) error {
	o, dims, name, err := w.object(ctx)
	if o == nil || err != nil || w.once(o) {
		return err
	}
	props, ok := propsOfName(name)
	if !ok {
		return nil
	}
	nd := slices.Clone(dims)
	span := spanDims(&props)
	nd[0] = 1 + w.r.Uint64N(span[0])
	for i := 1; i < len(nd) && len(nd) == len(span); i++ {
		if w.r.IntN(3) == 0 {
			nd[i] = 1 + w.r.Uint64N(span[i])
		}
	}
	n, err := w.log.invoke(Record{Kind: kindSetDims, Obj: name, ID: o.ID(), Dims: nd})
	if err != nil {
		return err
	}
	if err := o.SetDims(ctx, nd); err != nil {
		return w.failed(n, name, err)
	}
	return w.log.done(n, Record{})
}

func (w *worker) deleteObject(ctx context.Context) error {
	o, _, name, err := w.object(ctx)
	if o == nil || err != nil || w.once(o) {
		return err
	}
	n, err := w.log.invoke(Record{Kind: kindDelete, Obj: name, ID: o.ID()})
	if err != nil {
		return err
	}
	if err := o.Delete(ctx); err != nil {
		return w.failed(n, name, err)
	}
	delete(w.objs, name)
	w.gone[name] = true
	return w.log.done(n, Record{})
}

func cellsOf(buf []byte) []uint64 {
	vals := make([]uint64, len(buf)/8)
	for i := range vals {
		vals[i] = binary.LittleEndian.Uint64(buf[8*i:])
	}
	return vals
}

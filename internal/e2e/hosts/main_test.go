// Package hosts_test runs pdc across hosts: real pdc server processes,
// one per node of a multi-host test bed (internal/bed: network
// namespaces on a bridge, each with its own address, host name and data
// dir, the cluster's tmpdir on a directory all share), and clients on
// another node, through partitions of nodes from clients and from each
// other (issue 26). A package of its own, so that its test binary runs
// beside the other end-to-end packages.
package hosts_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/tagindex"
	"github.com/pdcgo/pdc/region"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m, clientRole)) }

// opTimeoutEnv is each operation's deadline in the ops role; rowsEnv, if
// set, the rows of its objects (dims[0]).
const (
	opTimeoutEnv = "HOSTS_OP_TIMEOUT"
	rowsEnv      = "HOSTS_ROWS"
)

var partitions = []client.Partition{client.ObjectStatic, client.RegionStatic, client.RegionDynamic, client.RegionLocal}

// dims of every region object: 4 bands of 64 rows, each written apart so
// that the dynamic and local partitions spread them.
var dims = []uint64{256, 64}

const bands = 4

// clientRole "ops" reads commands from stdin, one a line, and answers each
// with one line: "ok ..." or "err unavailable=B timeout=B MESSAGE". Each
// command runs under its own deadline ($HOSTS_OP_TIMEOUT):
//
//	setup          create the container and one object per partition
//	open           open them (in a new client process)
//	write K        write every object whole, band by band, with pattern K
//	read K         read every object whole and compare with pattern K
//	tag K N        create N objects t-K-I and tag each with key tagKey(K, I)
//	find K N       query each key tagKey(K, I) and check it finds t-K-I
//	findlast K N   the same, by a collective query of two ranks, for the
//	               keys whose entries live on the last metadata server
//	               only; answers with how many it checked
//	dartdel K I    remove, through the DART API, tag tagKey(K, I)=v from
//	               the index
//	dartgone K L   check that an index query finds none of the tags of
//	               round K with an index in the list L (a,b,c)
//	screate N      create object "s" of N int32 cells (object-static)
//	sopen          open object "s" (a handle of this process)
//	swrite K LO HI write cells LO..HI of "s" with pattern K
//	sread K LO HI  read cells LO..HI of "s" and compare with pattern K
//	sdims N        set the dims of "s" to [N]
func clientRole(ctx context.Context, c *client.Client, role string, out *bufio.Writer) error {
	if role != "ops" {
		return fmt.Errorf("unknown role %q", role)
	}
	timeout, err := time.ParseDuration(os.Getenv(opTimeoutEnv))
	if err != nil {
		return fmt.Errorf("$%s: %w", opTimeoutEnv, err)
	}
	if r := os.Getenv(rowsEnv); r != "" {
		n, err := strconv.ParseUint(r, 10, 64)
		if err != nil || n%bands != 0 {
			return fmt.Errorf("$%s=%q: want a multiple of %d", rowsEnv, r, bands)
		}
		dims[0] = n
	}
	o := &ops{c: c}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		octx, cancel := context.WithTimeout(ctx, timeout)
		start := time.Now()
		res, err := o.do(octx, f)
		cancel()
		if err != nil {
			fmt.Fprintf(out, "err unavailable=%t timeout=%t after=%v %v\n",
				errors.Is(err, pdc.ErrUnavailable), errors.Is(err, pdc.ErrTimeout), time.Since(start).Round(time.Millisecond), strings.ReplaceAll(err.Error(), "\n", " "))
		} else {
			fmt.Fprintf(out, "ok %s\n", res)
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return in.Err()
}

type ops struct {
	c    *client.Client
	ct   *client.Container
	objs []*client.Object
	s    *client.Object // the one-dim object of the s commands
}

func (o *ops) do(ctx context.Context, f []string) (string, error) {
	arg := func(i int) int {
		if i >= len(f) {
			return 0
		}
		n, _ := strconv.Atoi(f[i])
		return n
	}
	switch f[0] {
	case "setup":
		return o.doSetup(ctx)
	case "open":
		return o.doOpen(ctx)
	case "write":
		return o.doWrite(ctx, arg(1))
	case "read":
		return o.doRead(ctx, arg(1))
	case "tag":
		return o.doTag(ctx, arg(1), arg(2))
	case "find":
		return o.doFind(ctx, arg(1), arg(2))
	case "findlast":
		return o.doFindLast(ctx, arg(1), arg(2))
	case "dartdel":
		return o.doDARTDelete(ctx, arg(1), arg(2))
	case "dartgone":
		return o.doDARTGone(ctx, arg(1), f[2])
	case "screate", "sopen", "swrite", "sread", "sdims":
		return o.doS(ctx, f[0], arg(1), uint64(arg(2)), uint64(arg(3)))
	}
	return "", fmt.Errorf("unknown command %q", f[0])
}

// doSetup creates the container and one object per partition.
func (o *ops) doSetup(ctx context.Context) (string, error) {
	ct, _, err := o.c.CreateContainer(ctx, "hosts", client.Persistent)
	if err != nil {
		return "", err
	}
	o.ct = ct
	for i, p := range partitions {
		obj, err := ct.CreateObject(ctx, fmt.Sprintf("p%d", i), client.ObjectProps{Dims: dims, Type: region.Int32, Partition: p})
		if err != nil {
			return "", err
		}
		o.objs = append(o.objs, obj)
	}
	return "", nil
}

// doOpen opens the container and objects a previous client created.
func (o *ops) doOpen(ctx context.Context) (string, error) {
	ct, err := o.c.OpenContainer(ctx, "hosts")
	if err != nil {
		return "", err
	}
	o.ct = ct
	for i := range partitions {
		obj, err := o.c.OpenObject(ctx, fmt.Sprintf("p%d", i))
		if err != nil {
			return "", err
		}
		o.objs = append(o.objs, obj)
	}
	return "", nil
}

// doWrite writes pattern k to every object, band by band.
func (o *ops) doWrite(ctx context.Context, k int) (string, error) {
	rows := dims[0] / bands
	for _, obj := range o.objs {
		for b := range uint64(bands) {
			box := region.Box{Off: []uint64{b * rows, 0}, Size: []uint64{rows, dims[1]}}
			if err := obj.Write(ctx, box, pattern(k, obj.ID(), b*rows*dims[1], rows*dims[1])); err != nil {
				return "", fmt.Errorf("write %s band %d: %w", obj.Info().Name, b, err)
			}
		}
	}
	return "", nil
}

// doRead checks every object holds pattern k.
func (o *ops) doRead(ctx context.Context, k int) (string, error) {
	n := dims[0] * dims[1]
	for _, obj := range o.objs {
		buf := make([]byte, 4*n)
		if err := obj.Read(ctx, region.Box{Off: []uint64{0, 0}, Size: dims}, buf); err != nil {
			return "", fmt.Errorf("read %s: %w", obj.Info().Name, err)
		}
		if want := pattern(k, obj.ID(), 0, n); !bytes.Equal(buf, want) {
			i := 0
			for buf[i] == want[i] {
				i++
			}
			return "", fmt.Errorf("%s differs from pattern %d at cell %d", obj.Info().Name, k, i/4)
		}
	}
	return "", nil
}

// doTag creates n objects of round k, each with its own tag, and returns
// the indices acknowledged; a failure is reported after.
func (o *ops) doTag(ctx context.Context, k, n int) (string, error) {
	var acked []string
	var errs []error
	for i := range n {
		obj, err := o.ct.CreateObject(ctx, fmt.Sprintf("t-%d-%d", k, i), client.ObjectProps{Dims: []uint64{1}, Type: region.Int32})
		if err == nil {
			err = obj.PutTag(ctx, tagKey(k, i), client.String("v"))
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		acked = append(acked, strconv.Itoa(i))
	}
	// The acknowledged ones, for find; a failure is reported after.
	return strings.Join(acked, ","), errors.Join(errs...)
}

// doFind checks a query finds each of the n tags of round k.
func (o *ops) doFind(ctx context.Context, k, n int) (string, error) {
	var missing []string
	for i := range n {
		ms, err := o.c.Query(ctx, tagKey(k, i), client.WithNames())
		if err != nil {
			return "", err
		}
		if len(ms) != 1 || ms[0].Name != fmt.Sprintf("t-%d-%d", k, i) {
			missing = append(missing, fmt.Sprintf("%s:%v", tagKey(k, i), ms))
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("queries missed: %s", strings.Join(missing, " "))
	}
	return "", nil
}

// doDARTDelete removes tag i of round k from the index, as
// PDC_Client_delete_obj_ref_from_dart does.
func (o *ops) doDARTDelete(ctx context.Context, k, i int) (string, error) {
	obj, err := o.c.OpenObject(ctx, fmt.Sprintf("t-%d-%d", k, i))
	if err != nil {
		return "", err
	}
	return "", o.c.IndexDelete(ctx, tagKey(k, i), "v", obj.ID())
}

// doDARTGone checks that an index query finds none of the tags of round
// k with the indices in list.
func (o *ops) doDARTGone(ctx context.Context, k int, list string) (string, error) {
	var found []string
	for _, f := range strings.Split(list, ",") {
		i, err := strconv.Atoi(f)
		if err != nil {
			return "", err
		}
		q := tagKey(k, i) + "=v"
		ms, err := o.c.Query(ctx, q, client.IndexOnly(), client.WithNames())
		if err != nil {
			return "", err
		}
		if len(ms) > 0 {
			found = append(found, fmt.Sprintf("%s:%v", q, ms))
		}
	}
	if len(found) > 0 {
		return "", fmt.Errorf("queries found what the index no longer holds: %s", strings.Join(found, " "))
	}
	return "", nil
}

// doS runs the commands on the one-dim object "s" (see clientRole).
func (o *ops) doS(ctx context.Context, cmd string, k int, lo, hi uint64) (string, error) {
	if cmd != "screate" && cmd != "sopen" && o.s == nil {
		return "", fmt.Errorf("%s before screate or sopen", cmd)
	}
	var err error
	switch cmd {
	case "screate":
		var ct *client.Container
		if ct, _, err = o.c.CreateContainer(ctx, "s", client.Persistent); err == nil {
			o.s, err = ct.CreateObject(ctx, "s", client.ObjectProps{Dims: []uint64{uint64(k)}, Type: region.Int32, Partition: client.ObjectStatic})
		}
	case "sopen":
		o.s, err = o.c.OpenObject(ctx, "s")
	case "sdims":
		err = o.s.SetDims(ctx, []uint64{uint64(k)})
	case "swrite":
		err = o.s.Write(ctx, region.Box{Off: []uint64{lo}, Size: []uint64{hi - lo}}, pattern(k, o.s.ID(), lo, hi-lo))
	case "sread":
		buf := make([]byte, 4*(hi-lo))
		if err = o.s.Read(ctx, region.Box{Off: []uint64{lo}, Size: []uint64{hi - lo}}, buf); err == nil {
			if want := pattern(k, o.s.ID(), lo, hi-lo); !bytes.Equal(buf, want) {
				i := 0
				for buf[i] == want[i] {
					i++
				}
				err = fmt.Errorf("cell %d of s holds %d, not %d of pattern %d",
					lo+uint64(i/4), binary.LittleEndian.Uint32(buf[i/4*4:]), binary.LittleEndian.Uint32(want[i/4*4:]), k)
			}
		}
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", cmd, err)
	}
	return "", nil
}

// doFindLast checks that a collective query of two ranks finds each of
// the n tags of round k whose index entries live on the last metadata
// server alone: its plan asks that one server, so the second rank has no
// server to ask. It returns how many tags it checked.
func (o *ops) doFindLast(ctx context.Context, k, n int) (string, error) {
	var meta int
	for _, s := range o.c.Servers() {
		if s.Roles == "metadata" || s.Roles == "both" {
			meta++
		}
	}
	const size = 2
	checked := 0
	for i := range n {
		pq, err := tagindex.Parse(tagKey(k, i))
		if err != nil {
			return "", err
		}
		if plan := tagindex.For(meta).Plan(pq, true); plan.Scan || plan.Then || !slices.Equal(plan.Servers, []int{meta - 1}) {
			continue
		}
		g := newGather(size)
		got := make([][]client.Match, size)
		errs := make([]error, size)
		var wg sync.WaitGroup
		for r := range size {
			wg.Go(func() {
				got[r], errs[r] = o.c.QueryCollective(ctx, tagKey(k, i), r, size, g.rank(r), client.WithNames())
			})
		}
		wg.Wait()
		for r := range size {
			if errs[r] != nil {
				return "", fmt.Errorf("rank %d of %d, %s: %w", r, size, tagKey(k, i), errs[r])
			}
			if len(got[r]) != 1 || got[r][0].Name != fmt.Sprintf("t-%d-%d", k, i) {
				return "", fmt.Errorf("rank %d of %d, %s: found %v", r, size, tagKey(k, i), got[r])
			}
		}
		checked++
	}
	return strconv.Itoa(checked), nil
}

// gather is an in-process MPI_Allgather for the ranks of a collective
// query.
type gather struct {
	mu    sync.Mutex
	cond  *sync.Cond
	size  int
	round int
	n     int
	parts [][]byte
	out   [][]byte
}

func newGather(size int) *gather {
	g := &gather{size: size, parts: make([][]byte, size)}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *gather) rank(r int) client.AllGather {
	return func(_ context.Context, part []byte) ([][]byte, error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		round := g.round
		g.parts[r] = part
		if g.n++; g.n == g.size {
			g.out, g.parts, g.n = g.parts, make([][]byte, g.size), 0
			g.round++
			g.cond.Broadcast()
		}
		for g.round == round {
			g.cond.Wait()
		}
		return g.out, nil
	}
}

// tagKey is the key of tag I of round K: keys start with different
// letters so that their index entries spread over the servers (DART
// partitions terms by their leading characters).
func tagKey(k, i int) string {
	return fmt.Sprintf("%c%c-%d-%d", 'a'+i%26, 'a'+(i/26+k)%26, k, i)
}

// pattern is n cells of round k of object id from cell off on.
func pattern(k int, id, off, n uint64) []byte {
	b := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(k)*1_000_003+uint32(id)*7919+uint32(off+i))
	}
	return b
}

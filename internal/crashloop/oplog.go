package crashloop

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

// Operation kinds.
const (
	kindCreate  = "create"  // create object Obj: ID
	kindOpen    = "open"    // does Obj exist (a read of its existence): ID, Dims
	kindWrite   = "write"   // write WID's cells over Box of Obj
	kindRead    = "read"    // read Box of Obj: Vals
	kindPutTag  = "puttag"  // put tag Tag of Obj to WID
	kindGetTag  = "gettag"  // read tag Tag of Obj: WID, 0 if absent
	kindDelete  = "delete"  // delete object ID (Obj)
	kindSetDims = "setdims" // set the dims of object ID to Dims
	kindDelTag  = "deltag"  // delete tag Tag of Obj
	kindSearch  = "search"  // search tags (Search): Hits
	kindList    = "list"    // list the container's objects: Listed
)

// Events of an operation.
const (
	evInvoke = "inv"
	evOK     = "ok"
	evFail   = "fail" // the outcome is unknown
)

// Record is one line of an op log.
type Record struct {
	Proc int    `json:"p"`
	Op   uint64 `json:"op"` // number within the process
	Ev   string `json:"ev"`
	T    int64  `json:"t"` // CLOCK_MONOTONIC ns

	// On invocation.
	Kind  string      `json:"k,omitempty"`
	Obj   string      `json:"obj,omitempty"`
	Props *ObjProps   `json:"props,omitempty"` // create
	Box   *region.Box `json:"box,omitempty"`   // write, read
	Tag   string      `json:"tag,omitempty"`
	WID   uint64      `json:"wid,omitempty"` // write, puttag: the value written; gettag ok: read
	// ID names the object's incarnation (an id is never reused, so a
	// delete and a create of the same name make another): on the
	// invocation of an operation through a handle (write, read, tag
	// operations, delete, set dims), on the acknowledgement of a create
	// or an open that found it.
	ID uint64 `json:"id,omitempty"`
	// Dims are the dims set (set dims), or seen (open ok).
	Dims []uint64 `json:"dims,omitempty"`
	// Search is the search (search).
	Search *SearchSpec `json:"search,omitempty"`

	// On an outcome.
	Found bool     `json:"found,omitempty"` // open ok
	Vals  []uint64 `json:"vals,omitempty"`  // read ok: the cells' raw values
	Hits  []uint64 `json:"hits,omitempty"`  // search ok: the ids found
	Names []string `json:"names,omitempty"` // search ok, if it asked for names: theirs
	// Listed are the objects a list found.
	Listed []Listed `json:"listed,omitempty"`
	Err    string   `json:"err,omitempty"` // fail
}

// Listed is an object a listing found.
type Listed struct {
	Name string   `json:"n"`
	ID   uint64   `json:"id"`
	Dims []uint64 `json:"d"`
}

// ObjProps is what the checker needs to know of an object.
type ObjProps struct {
	Dims      []uint64 `json:"dims"`
	Partition int      `json:"part"`
	Storage   int      `json:"storage"`
}

// opLog appends records to a file, one write(2) per record, so that a
// record is in the kernel (and survives the process's kill -9) once
// logged. Safe for concurrent use.
type opLog struct {
	proc int
	mu   sync.Mutex
	f    *os.File
	next uint64
	buf  []byte
}

func createLog(path string, proc int) (*opLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("op log: %w", err)
	}
	return &opLog{proc: proc, f: f}, nil
}

// invoke logs r as the invocation of a new operation and returns its
// number. The time is taken last, just before the line is written.
func (l *opLog) invoke(r Record) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	r.Op, r.Ev = l.next, evInvoke
	return r.Op, l.writeLocked(r)
}

// done logs the outcome of operation op; the time is taken first.
func (l *opLog) done(op uint64, r Record) error {
	r.T = now()
	l.mu.Lock()
	defer l.mu.Unlock()
	r.Op = op
	if r.Ev == "" {
		r.Ev = evOK
	}
	return l.writeLocked(r)
}

func (l *opLog) fail(op uint64, err error) error {
	return l.done(op, Record{Ev: evFail, Err: err.Error()})
}

func (l *opLog) writeLocked(r Record) error {
	r.Proc = l.proc
	if r.T == 0 {
		r.T = now()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	l.buf = append(append(l.buf[:0], b...), '\n')
	if _, err := l.f.Write(l.buf); err != nil {
		return fmt.Errorf("op log: %w", err)
	}
	return nil
}

func (l *opLog) close() error { return l.f.Close() }

// readLog reads the records of an op log. A last line without its
// newline was cut by the writer's death and is dropped; any other bad
// line is an error.
func readLog(path string) ([]Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("op log: %w", err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i < len(data)-1 {
		data = data[:i+1]
	}
	var recs []Record
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for n := 1; sc.Scan(); n++ {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("op log %s line %d: %v: %w", path, n, err, pdc.ErrCorrupt)
		}
		recs = append(recs, r)
	}
	return recs, sc.Err()
}

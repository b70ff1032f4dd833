package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/atomicfile"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/vfs"
	"golang.org/x/sys/unix"
)

// ownerVersion is the version of the owner file's format.
const ownerVersion = 1

// owner is what a server records beside its lock on its rank's share of
// the data dir: who to name when another cluster's server finds the lock
// held (two clusters pointed at one data dir).
type owner struct {
	Version int    `json:"version"`
	PID     int    `json:"pid"`
	Rank    int    `json:"rank"`
	TmpDir  string `json:"tmpdir"`
	Host    string `json:"host"`
	Started string `json:"started"` // RFC 3339
	// Addr and Instance are where the server answers, and as which
	// instance, once it listens; empty before. Older records lack them.
	Addr     string `json:"addr,omitempty"`
	Instance string `json:"instance,omitempty"`
}

func ownerPaths(dataDir string, rank int) (lock, rec string) {
	base := filepath.Join(dataDir, fmt.Sprintf("owner-%d", rank))
	return base + ".lock", base
}

// lockDataDir takes this rank's lock on the data dir, held until the
// server ends, and records the owner beside it. A lock held already is
// an error naming the cluster that holds it.
func (p *proc) lockDataDir(ctx context.Context) error {
	cfg := p.cfg
	fsys := vfs.OrDefault(cfg.FS)
	lockPath, recPath := ownerPaths(cfg.DataDir, cfg.Rank)
	_, serr := fsys.Stat(lockPath)
	madeLock := errors.Is(serr, fs.ErrNotExist)
	l, err := fsys.Lock(lockPath)
	if errors.Is(err, fs.ErrExist) {
		gone, werr := p.awaitPredecessor(ctx, fsys, recPath)
		if werr != nil {
			return werr
		}
		if gone {
			l, err = fsys.Lock(lockPath)
		}
	}
	if err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
		}
		return inUseError(fsys, cfg.DataDir, cfg.Rank, recPath)
	}
	p.onClose(func() { l.Close() })
	if madeLock {
		// Removed while still held, so that no other start locks the
		// file this one goes on to remove.
		p.undoIfRefused(func() { _ = fsys.Remove(lockPath) })
	}
	// A refused start puts back the owner record it replaced (that of
	// the last server of this rank), or removes its own.
	prev, perr := vfs.ReadFile(fsys, recPath)
	p.undoIfRefused(func() {
		if perr == nil {
			_ = atomicfile.WriteFS(fsys, recPath, prev, 0o600)
		} else {
			_ = fsys.Remove(recPath)
		}
	})
	tmpdir, _ := filepath.Abs(cfg.TmpDir)
	host, _ := os.Hostname()
	if cfg.Host != "" {
		host = cfg.Host
	}
	p.own = owner{Version: ownerVersion, PID: os.Getpid(), Rank: cfg.Rank, TmpDir: tmpdir, Host: host,
		Started: time.Now().UTC().Format(time.RFC3339)}
	return p.writeOwner()
}

// recordAddr adds to the owner record where the server answers, once it
// listens, so that a second start of this rank can ask it whether it
// runs even before the cluster has a server list.
func (p *proc) recordAddr(addr, instance string) error {
	p.own.Addr, p.own.Instance = addr, instance
	return p.writeOwner()
}

func (p *proc) writeOwner() error {
	_, recPath := ownerPaths(p.cfg.DataDir, p.cfg.Rank)
	b, err := json.Marshal(p.own)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFS(vfs.OrDefault(p.cfg.FS), recPath, b, 0o600); err != nil {
		return fmt.Errorf("data dir %s: record its owner: %w", p.cfg.DataDir, err)
	}
	return nil
}

// readOwner reads the owner record at recPath, if there is one this
// build reads.
func readOwner(fsys vfs.FS, recPath string) (owner, bool) {
	var o owner
	b, err := vfs.ReadFile(fsys, recPath)
	if err != nil || json.Unmarshal(b, &o) != nil || o.Version != ownerVersion {
		return owner{}, false
	}
	return o, true
}

// predecessorWait bounds how long a server waits for the previous
// server of its rank to finish exiting.
const predecessorWait = 10 * time.Second

// awaitPredecessor waits, if the lock on this rank's share is held by the
// previous server of this rank and cluster on this host, for that process
// to end, and reports whether it did. A server killed with -9 holds its
// lock until the kernel has taken down its address space, which for one
// with large mappings takes a while: a restart of a dead rank right after
// the kill (pdc up --restart-dead) found the lock held and failed. The
// wait is on the process itself (a pidfd), not a retry loop.
//
// The holder may also be no predecessor at all but this rank's server,
// alive and serving: pdc server --rank 1 run by mistake next to a running
// cluster. That one will not exit, and waiting predecessorWait for it
// only delayed the refusal. So while it waits it asks the server the
// cluster's list names for this rank (the holder's pid) whether it
// answers; if it does, the error names it at once. A dying server does
// not answer (its listener's backlog takes the connection, nobody reads
// it), so the probe cannot mistake a predecessor for a live server.
func (p *proc) awaitPredecessor(ctx context.Context, fsys vfs.FS, recPath string) (gone bool, err error) {
	o, ok := readOwner(fsys, recPath)
	if !ok {
		return false, nil
	}
	tmpdir, _ := filepath.Abs(p.cfg.TmpDir)
	host, _ := os.Hostname()
	if p.cfg.Host != "" {
		host = p.cfg.Host
	}
	if o.Rank != p.cfg.Rank || o.TmpDir != tmpdir || o.Host != host || o.PID <= 0 || o.PID == os.Getpid() {
		return false, nil
	}
	fd, err := unix.PidfdOpen(o.PID, 0)
	if err == unix.ESRCH {
		return true, nil // gone since the lock was tried
	}
	if err != nil {
		return false, nil
	}
	defer unix.Close(fd)
	// The probe wakes the poll below through wake: once when the server
	// answers, else once when the wait ends, so that the poll needs no
	// timeout slices to notice either.
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return false, fmt.Errorf("wait for the previous server of this rank: %w", err)
	}
	defer unix.Close(wake)
	wctx, cancel := context.WithTimeout(ctx, predecessorWait)
	answered := make(chan cluster.Server, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		// Logged after the first probe: a server that answers is
		// refused, not waited for.
		waiting := func() {
			p.log.Info("waiting for the previous server of this rank to exit", "pid", o.PID, "up_to", predecessorWait.String())
		}
		if s, ok := p.answering(wctx, fsys, recPath, o.PID, waiting); ok {
			answered <- s
		} else {
			<-wctx.Done()
		}
		_, _ = unix.Write(wake, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	})
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(wake), Events: unix.POLLIN}}
	deadline := time.Now().Add(predecessorWait)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false, nil
		}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return false, nil
		}
		if fds[0].Revents != 0 {
			return true, nil
		}
		select {
		case s := <-answered:
			return false, runningError(s, o)
		default:
		}
		if ctx.Err() != nil {
			return false, fmt.Errorf("wait for the previous server of this rank (pid %d) to exit: %w", o.PID, ctx.Err())
		}
		return false, nil // predecessorWait passed
	}
}

// answering returns this rank's server, process pid, if it answers as
// the instance that its owner record at recPath names once it listens,
// or (a server of a build whose record names no address) as the one the
// cluster's list names. The server list exists only once every rank has
// registered; the record, as soon as the server listens, so a server of
// a cluster still starting is found too. A holder that has not recorded
// its address yet (it opens its stores first) is watched for until it
// does or ctx ends; waiting is called once, when the first look finds
// no answer.
func (p *proc) answering(ctx context.Context, fsys vfs.FS, recPath string, pid int, waiting func()) (cluster.Server, bool) {
	w := cluster.WatchDir(p.cfg.DataDir, time.Second)
	defer w.Close()
	for first := true; ; first = false {
		o, ok := readOwner(fsys, recPath)
		if ok && o.PID == pid && o.Addr != "" {
			// No Start: in no server list yet, the cluster starting.
			s := cluster.Server{Rank: o.Rank, Addr: o.Addr, Instance: o.Instance, PID: o.PID, Host: o.Host}
			if l, err := p.clusterDir().ReadList(); err == nil && p.cfg.Rank < len(l.Servers) && l.Servers[p.cfg.Rank].PID == pid {
				s = l.Servers[p.cfg.Rank]
			}
			if cluster.Alive(ctx, s) {
				return s, true
			}
			if first {
				waiting()
			}
			return cluster.Server{}, false // it listened and answers no more: exiting
		}
		if l, err := p.clusterDir().ReadList(); err == nil {
			for _, s := range l.Servers {
				if s.Rank == p.cfg.Rank && s.PID == pid && cluster.Alive(ctx, s) {
					return s, true
				}
			}
		}
		if first {
			waiting()
		}
		if w.Wait(ctx) != nil {
			return cluster.Server{}, false
		}
	}
}

// runningError says that this rank's server s (owner o of its share)
// runs and answers, and what to do about it. A server not yet in a
// server list (s.Start unset) is of a cluster still starting: no list
// names it for pdc down to stop it.
func runningError(s cluster.Server, o owner) error {
	if s.Start.IsZero() {
		return fmt.Errorf("already running and answering at %s, pid %d on %s, in the cluster starting in %s (since %s; not every rank has registered yet): "+
			"stop it first (kill %d), or let the start finish and stop the cluster with `pdc down --tmpdir %s`: %w",
			s.Addr, s.PID, s.Host, o.TmpDir, o.Started, s.PID, o.TmpDir, pdc.ErrExists)
	}
	return fmt.Errorf("already running and answering at %s, pid %d on %s, in the cluster in %s (since %s): stop it first (`pdc down --tmpdir %s` stops the cluster): %w",
		s.Addr, s.PID, s.Host, o.TmpDir, o.Started, o.TmpDir, pdc.ErrExists)
}

// inUseError says which cluster holds rank's share of dataDir, as far as
// its owner file tells.
func inUseError(fsys vfs.FS, dataDir string, rank int, recPath string) error {
	var o owner
	b, err := vfs.ReadFile(fsys, recPath)
	if err == nil {
		err = json.Unmarshal(b, &o)
	}
	if err != nil || o.Version != ownerVersion {
		return fmt.Errorf("data dir %s: rank %d's share is in use by another server (its owner file %s: %v): %w", dataDir, rank, recPath, err, pdc.ErrExists)
	}
	return fmt.Errorf("data dir %s: rank %d's share is in use by pid %d on %s, rank %d of the cluster in %s (since %s); stop it with `pdc down --tmpdir %s`, or give this cluster another --datadir: %w",
		dataDir, rank, o.PID, o.Host, o.Rank, o.TmpDir, o.Started, o.TmpDir, pdc.ErrExists)
}

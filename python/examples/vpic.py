"""VPIC-style particles: N processes each write their block of 8 shared 1-D
objects (x, y, z, px, py, pz float32; id1, id2 int32), then read it back.

    pdc up -n 2 && python3 vpic.py --procs 4 --n 1048576
"""

import argparse
import multiprocessing

import numpy as np

import pdc

VARS = [("x", np.float32), ("y", np.float32), ("z", np.float32), ("px", np.float32),
        ("py", np.float32), ("pz", np.float32), ("id1", np.int32), ("id2", np.int32)]


def values(name, dtype, rank, n):
    i = np.arange(rank * n, (rank + 1) * n, dtype=np.int64)
    return ((i * (len(name) + 3)) % 100003).astype(dtype)


def rank_main(args):
    run, rank, n = args
    with pdc.connect() as conn:
        objs = [conn.object(f"{run}-{name}") for name, _ in VARS]
        box = np.s_[rank * n:(rank + 1) * n]
        pdc.wait_all([o.start_write(box, values(name, dt, rank, n)) for o, (name, dt) in zip(objs, VARS)])
        reads = [o.start_read(box) for o in objs]
        pdc.wait_all(reads)
        for t, (name, dt) in zip(reads, VARS):
            if not np.array_equal(t.result, values(name, dt, rank, n)):
                raise SystemExit(f"rank {rank}: {name} differs")
    return rank


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--n", type=int, default=1 << 16, help="particles per process")
    ap.add_argument("--run", default="vpic-py")
    a = ap.parse_args()
    with pdc.connect() as conn:
        cont = conn.create_container(a.run)
        for name, dt in VARS:
            cont.create_object(f"{a.run}-{name}", (a.procs * a.n,), dt).close()
    with multiprocessing.get_context("spawn").Pool(a.procs) as pool:
        done = pool.map(rank_main, [(a.run, r, a.n) for r in range(a.procs)])
    print(f"vpic.py: {len(done)} processes wrote and read back {a.n} particles each")


if __name__ == "__main__":
    main()

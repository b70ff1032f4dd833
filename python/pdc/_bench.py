"""The Python side of `pdc bench python`: one round of the same work the
Go client does in the same round, timed here, printed as one JSON line.

    python3 -m pdc bench --tmpdir T --container C --object O --rows R --cols N --tags K --tag-object TO
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Optional, Sequence

import numpy as np

import pdc


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="pdc bench python (python side)")
    p.add_argument("--tmpdir")
    p.add_argument("--container", required=True)
    p.add_argument("--object", required=True)
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--cols", type=int, required=True)
    p.add_argument("--tags", type=int, required=True)
    p.add_argument("--tag-object", required=True)
    a = p.parse_args(argv)
    with pdc.connect(tmpdir=a.tmpdir) as conn:
        cont = conn.create_container(a.container)
        try:
            obj = conn.object(a.object)
        except pdc.NotFound:
            obj = cont.create_object(a.object, (a.rows, a.cols), np.float64)
        try:
            tobj = conn.object(a.tag_object)
        except pdc.NotFound:
            tobj = cont.create_object(a.tag_object, (1,), np.int64)
        buf = np.random.default_rng(1).random(a.cols)
        t0 = time.perf_counter()
        for i in range(a.rows):  # one region (a row) at a time, as the Go side
            obj[i] = buf
        t1 = time.perf_counter()
        out = np.empty(a.cols)
        for i in range(a.rows):
            obj.read(np.s_[i], out=out)
        t2 = time.perf_counter()
        tags = tobj.tags
        for i in range(a.tags):
            tags["t%d" % i] = i
        t3 = time.perf_counter()
        if not np.array_equal(out, buf):
            raise pdc.Error("pdc bench python: the last region read back differs from what was written")
        print(json.dumps({"write_s": t1 - t0, "read_s": t2 - t1, "tags_s": t3 - t2}))
    return 0

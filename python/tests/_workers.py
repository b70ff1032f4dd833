"""Worker functions for test_fork.py (importable by spawned processes)."""

import os

import numpy as np

import pdc


def write_rows(args):
    tmpdir, name, i, cols = args
    with pdc.connect(tmpdir=tmpdir) as conn:
        obj = conn.object(name)
        obj[i, :] = np.full(cols, i, obj.dtype)
        obj.tags["writer-%d" % i] = os.getpid()
        obj.close()
    return os.getpid()

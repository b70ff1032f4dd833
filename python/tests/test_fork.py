import multiprocessing
import os
import sys

import numpy as np
import pytest

import pdc

sys.path.insert(0, os.path.dirname(__file__))
import _workers  # noqa: E402


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_multiprocessing(cluster, conn, method):
    """Workers forked (or spawned) after the parent loaded libpdc and
    connected each connect anew and write a row; the parent reads them."""
    cont = conn.create_container("py-mp-%s-%d" % (method, os.getpid()))
    rows, cols = 12, 256
    name = "mp-%s-%d" % (method, os.getpid())
    obj = cont.create_object(name, (rows, cols), np.int64)
    obj[:, :] = -1
    with multiprocessing.get_context(method).Pool(3) as pool:
        pids = pool.map(_workers.write_rows, [(str(cluster["tmpdir"]), name, i, cols) for i in range(rows)])
    assert os.getpid() not in pids
    want = np.repeat(np.arange(rows, dtype=np.int64)[:, None], cols, axis=1)
    np.testing.assert_array_equal(obj[:, :], want)
    assert obj.tags["writer-0"] in pids


def test_fork_refuses_parents_connection(conn, cluster):
    """A connection made before a fork is refused in the child, clearly."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave without running pytest's teardown
        code = 1
        try:
            try:
                conn.container("anything")
            except pdc.Closed as e:
                code = 0 if "before a fork" in str(e) else 2
            with pdc.connect(tmpdir=str(cluster["tmpdir"])) as c2:
                c2.create_container("py-forked-%d" % os.getpid()).close()
        except BaseException:
            code = 3
        os.write(w, bytes([code]))
        os._exit(code)
    os.close(w)
    got = os.read(r, 1)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert got == b"\x00" and os.WEXITSTATUS(status) == 0, (got, status)

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pdc

HERE = os.path.dirname(os.path.abspath(__file__))


def run_py(code, env):
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_produce_consume_npy(cluster):
    """A consumer on node-b opens a .npy before a producer on node-a wrote it:
    pdc.open consumes (waits) before reading; the producer's pdc.open
    produces on close."""
    work = cluster["work"]
    pkg = os.path.dirname(os.path.dirname(pdc.__file__))
    base = dict(os.environ, PDC_TMPDIR=str(cluster["tmpdir"]),
                PYTHONPATH=pkg + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cons_dir = work / "cons-node-b"
    consumer = run_py(f"""
        import numpy as np, pdc
        print("consuming", flush=True)
        with pdc.open({str(cons_dir / "run" / "x.npy")!r}, "rb", timeout=60) as f:
            a = np.load(f)
        print(a.dtype, a.shape, int(a.sum()))
    """, dict(base, PDC_HOST="node-b", PDC_STAGE_CONSUMER_DIR=str(cons_dir)))
    assert consumer.stdout.readline().strip() == "consuming"
    prod_dir = work / "prod-node-a"
    (prod_dir / "run").mkdir(exist_ok=True)
    producer = run_py(f"""
        import numpy as np, pdc
        with pdc.open({str(prod_dir / "run" / "x.npy")!r}, "wb") as f:
            np.save(f, np.arange(1000, dtype=np.int32))
    """, dict(base, PDC_HOST="node-a", PDC_STAGE_PRODUCER_DIR=str(prod_dir)))
    _, perr = producer.communicate(timeout=120)
    assert producer.returncode == 0, perr
    out, err = consumer.communicate(timeout=120)
    assert consumer.returncode == 0, err
    assert out.strip() == "int32 (1000,) %d" % sum(range(1000))


def test_consume_timeout(cluster, monkeypatch, tmp_path):
    monkeypatch.setenv("PDC_HOST", "node-b")
    monkeypatch.setenv("PDC_STAGE_CONSUMER_DIR", str(tmp_path))
    with pdc.connect(tmpdir=str(cluster["tmpdir"])) as conn:
        with pytest.raises(pdc.Timeout, match="never.bin"):
            conn.consume("never.bin", timeout=0.5)
        with pytest.raises(pdc.Invalid, match="timeout"):
            conn.consume("never.bin", timeout=-1)

"""pdc import and pdc export: the Go command running the package's copies."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pdc

h5py = pytest.importorskip("h5py")


def in_package(binary):
    """Whether binary is the pdc pip installed into the package (it then
    finds the package's python itself)."""
    return Path(binary).resolve().parent.parent.parent == Path(pdc.__file__).resolve().parent


def pdc_env(cluster, **kw):
    e = dict(os.environ, PDC_TMPDIR=str(cluster["tmpdir"]))
    if not in_package(cluster["pdc"]):
        pkg = os.path.dirname(os.path.dirname(pdc.__file__))
        e.update(PDC_PYTHON=sys.executable, PYTHONPATH=pkg + os.pathsep + os.environ.get("PYTHONPATH", ""))
    e.update(kw)
    return e


def run(cluster, *args, env=None, **kw):
    return subprocess.run([cluster["pdc"]] + list(args), env=pdc_env(cluster, **(env or {})), capture_output=True,
                          text=True, timeout=300, **kw)


def test_import_export_hdf5_and_npy(cluster, conn, tmp_path):
    run_id = "cli%d" % os.getpid()
    src = tmp_path / ("%s.h5" % run_id)
    x = np.arange(300 * 4, dtype=np.float32).reshape(300, 4)
    y = np.arange(50, dtype=">i8")  # big-endian in the file
    with h5py.File(src, "w") as f:
        d = f.create_dataset("/particles/x", data=x)
        d.attrs.update({"units": "m", "step": 12, "dt": 0.5, "bounds": np.arange(3)})
        f.create_dataset("/particles/y", data=y)
    r = run(cluster, "import", str(src), "--chunk-bytes", "1KiB")  # every dataset, in chunks of 64 rows
    assert r.returncode == 0, r.stderr
    assert "as object particles/x in container %s: (300, 4) float32" % run_id in r.stdout
    assert "in 5 chunks, 3 tags" in r.stdout
    assert "attributes not copied (arrays; tags hold scalars): bounds" in r.stdout
    ox = conn.object("particles/x")
    np.testing.assert_array_equal(ox[:, :], x)
    assert ox.tags.items() == [("dt", 0.5), ("step", 12), ("units", "m")]
    np.testing.assert_array_equal(conn.object("particles/y")[:], y)

    out = tmp_path / "out.h5"
    r = run(cluster, "export", "particles/x", str(out), "--dataset", "/copy/x", "--chunk-bytes", "1000")
    assert r.returncode == 0, r.stderr
    assert "exported object particles/x to %s:/copy/x: (300, 4) float32" % out in r.stdout
    with h5py.File(out, "r") as f:
        np.testing.assert_array_equal(f["/copy/x"][...], x)
        assert dict(f["/copy/x"].attrs) == {"units": "m", "step": 12, "dt": 0.5}
    r = run(cluster, "export", "particles/x", str(out), "--dataset", "/copy/x")
    assert r.returncode != 0 and "already holds /copy/x" in r.stderr, r.stderr
    assert run(cluster, "export", "particles/x", str(out), "--dataset", "/copy/x", "--force").returncode == 0

    # one dataset by name, and .npy both ways
    r = run(cluster, "import", "%s:/particles/y" % src, "--name", "y-again", "--container", run_id + "-2")
    assert r.returncode == 0 and "as object y-again in container %s-2" % run_id in r.stdout, r.stderr
    r = run(cluster, "export", "y-again", str(tmp_path / "y.npy"))
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), y)
    r = run(cluster, "import", str(tmp_path / "y.npy"), "--name", "y-npy")
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(conn.object("y-npy")[:], y)


def test_import_errors(cluster, tmp_path):
    r = run(cluster, "import", str(tmp_path / "missing.h5"))
    assert r.returncode == 1 and "pdc import: pdc: %s: no such file" % (tmp_path / "missing.h5") in r.stderr, r.stderr
    r = run(cluster, "import", str(tmp_path / "a.txt"))
    assert r.returncode == 1 and "want a .npy file or an HDF5 file" in r.stderr, r.stderr
    r = run(cluster, "export", "no-such-object-%d" % os.getpid(), str(tmp_path / "o.npy"))
    assert r.returncode == 1 and "not found" in r.stderr, r.stderr
    r = run(cluster, "import", "--chunk-bytes", "lots", "x.h5")
    assert r.returncode == 2 and "--chunk-bytes" in r.stderr, r.stderr
    # a python without the package says so, and how to fix it
    r = run(cluster, "import", "x.h5", env={"PDC_PYTHON": "/usr/bin/python3", "PYTHONPATH": ""}, cwd=tmp_path)
    assert r.returncode == 1 and "cannot import the Python package pdc" in r.stderr, r.stderr


MEASURE = """
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stderr.write(r.stderr)
sys.stdout.write(r.stdout)
print("maxrss_kib", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(r.returncode)
"""


def measured(cluster, *args):
    """Runs pdc args; returns its output and the peak RSS (KiB) of the
    largest process it ran (the python doing the copy)."""
    r = subprocess.run([sys.executable, "-c", MEASURE, cluster["pdc"]] + list(args), env=pdc_env(cluster),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout, int(r.stdout.split("maxrss_kib")[1])


def test_chunks_bound_memory(cluster, conn, tmp_path):
    """A 64 MiB dataset copied in 2 MiB chunks, both ways, peaks at far
    less memory than the dataset over a tiny copy's peak: the copy never
    holds it whole."""
    tag = "mem%d" % os.getpid()
    small, big = tmp_path / "small.h5", tmp_path / "big.h5"
    with h5py.File(small, "w") as f:
        f.create_dataset("/v", data=np.arange(1024, dtype=np.float64).reshape(8, 128))
    rows = np.arange(8192, dtype=np.float64)[:, None] * 1024 + np.arange(1024, dtype=np.float64)
    with h5py.File(big, "w") as f:
        f.create_dataset("/v", data=rows)  # 64 MiB
    _, base = measured(cluster, "import", "%s:/v" % small, "--name", tag + "-small", "--chunk-bytes", "2MiB")
    out, peak = measured(cluster, "import", "%s:/v" % big, "--name", tag, "--chunk-bytes", "2MiB")
    assert "64.0 MiB in 32 chunks" in out
    assert peak - base < 24 * 1024, (base, peak)
    _, base_e = measured(cluster, "export", tag + "-small", str(tmp_path / "s.h5"), "--chunk-bytes", "2MiB")
    out, peak_e = measured(cluster, "export", tag, str(tmp_path / "b.h5"), "--chunk-bytes", "2MiB")
    assert peak_e - base_e < 24 * 1024, (base_e, peak_e)
    with h5py.File(tmp_path / "b.h5", "r") as f:
        np.testing.assert_array_equal(f["/" + tag][...], rows)


def test_bench_python(cluster):
    """pdc bench python runs both sides and reports Python against Go."""
    r = run(cluster, "bench", "python", "--size", "1MiB", "--region", "64KiB", "--tags", "20", "--rounds", "1",
            "--servers", "1")
    assert r.returncode == 0, r.stderr
    for case in ("write 64 KiB regions", "read 64 KiB regions", "tag puts one at a time"):
        assert case in r.stdout and "go client" in r.stdout, r.stdout

import json
import os
import signal
import subprocess

import numpy as np
import pytest

import pdc
from conftest import pdc_binary


def test_object_names(cont):
    for n in ("a", "b", "c"):
        cont.create_object("names-" + n, (2,), np.int8).close()
    assert sorted(n for n in cont.object_names() if n.startswith("names-")) == ["names-a", "names-b", "names-c"]


def test_object_names_fail_when_a_server_is_gone(tmp_path):
    """A listing cut short by a dead metadata server raises; it used to
    return the objects of the servers that answered as if that were all."""
    tmpdir = tmp_path / "tmp"
    binary = pdc_binary()
    env = dict(os.environ, PDC_TMPDIR=str(tmpdir), PDC_DATA_LOC=str(tmp_path / "data"))
    subprocess.run([binary, "up", "-n", "2"], env=env, check=True, stdout=subprocess.DEVNULL, timeout=120)
    try:
        old = os.environ.get("PDC_TIMEOUT")
        os.environ["PDC_TIMEOUT"] = "5"
        try:
            with pdc.connect(tmpdir=str(tmpdir)) as conn:
                cont = conn.create_container("names-dead")
                for i in range(40):  # spread over both metadata servers
                    cont.create_object("o%02d" % i, (2,), np.int8).close()
                assert len(cont.object_names()) == 40
                status = subprocess.run([binary, "status", "--json", "--tmpdir", str(tmpdir)], env=env,
                                        check=True, capture_output=True, text=True, timeout=60).stdout
                pids = [s["pid"] for s in map(json.loads, status.splitlines()) if s["rank"] == 1]
                os.kill(pids[0], signal.SIGKILL)
                with pytest.raises(pdc.Error):
                    cont.object_names()
        finally:
            if old is None:
                os.environ.pop("PDC_TIMEOUT", None)
            else:
                os.environ["PDC_TIMEOUT"] = old
    finally:
        subprocess.run([binary, "down", "--tmpdir", str(tmpdir), "--timeout", "10s"], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)


def test_names_with_a_nul_byte_are_refused(cont):
    with pytest.raises(pdc.Invalid, match="NUL"):
        cont.create_object("nul\0cut", (2,), np.int8)
    with pytest.raises(pdc.NotFound):
        cont.conn.object("nul")  # nothing was made under the cut name
    obj = cont.create_object("nul-tags", (2,), np.int8)
    with pytest.raises(pdc.Invalid, match="NUL"):
        obj.tags["k\0x"] = 1
    assert obj.tags.keys() == []
    with pytest.raises(pdc.Invalid, match="NUL"):
        obj.tags["k\0x"]


def test_npy_round_trip(cont, tmp_path):
    a = np.arange(1000 * 7, dtype=">f8").reshape(1000, 7)  # big-endian in the file
    np.save(tmp_path / "in.npy", a)
    obj = pdc.from_npy(cont, "npy-in", tmp_path / "in.npy", chunk_bytes=7 * 8 * 64)  # 64 rows a chunk
    assert obj.shape == (1000, 7) and obj.dtype == np.float64
    np.testing.assert_array_equal(obj[:, :], a)
    obj.to_npy(tmp_path / "out.npy", chunk_bytes=1000)
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), a)


def test_hdf5_round_trip(cont, tmp_path):
    h5py = pytest.importorskip("h5py")
    x = np.random.default_rng(1).random((500, 3)).astype(np.float32)
    with h5py.File(tmp_path / "run.h5", "w") as f:
        ds = f.create_dataset("/particles/x", data=x)
        ds.attrs["step"] = np.int64(10)
        ds.attrs["units"] = "m"
        ds.attrs["vec"] = np.arange(3)  # an array attribute: not copied
    obj = pdc.from_hdf5(tmp_path / "run.h5", "/particles/x", cont, "h5-x", chunk_bytes=1200)
    np.testing.assert_array_equal(obj[:, :], x)
    assert obj.tags["step"] == 10 and obj.tags["units"] == "m"
    assert obj.tags.get("vec") is None
    obj.to_hdf5(tmp_path / "out.h5", "/copy/x", tags=["step", "units"], chunk_bytes=1000)
    with h5py.File(tmp_path / "out.h5", "r") as f:
        np.testing.assert_array_equal(f["/copy/x"][...], x)
        assert f["/copy/x"].attrs["step"] == 10 and f["/copy/x"].attrs["units"] == "m"
    with pytest.raises(pdc.Invalid, match="not a dataset"):
        pdc.from_hdf5(tmp_path / "run.h5", "/particles", cont, "h5-grp")

"""Real pdc servers for the tests: `pdc up` from libpdc's install, in a
temp PDC_TMPDIR, and `pdc down` at teardown."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pdc
from pdc import _lib


def pdc_binary() -> str:
    b = _lib.bindir()
    if b is not None:
        return str(b / "pdc")
    found = shutil.which("pdc")
    if found is None:
        pytest.fail("no pdc binary beside libpdc (%s) nor on PATH" % _lib.path)
    return found


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """Two servers standing for node-a and node-b, each serving a producer dir."""
    work = tmp_path_factory.mktemp("pdc")
    tmpdir, data = work / "tmp", work / "data"
    for h in ("node-a", "node-b"):
        (work / f"prod-{h}").mkdir()
    env = dict(os.environ, PDC_TMPDIR=str(tmpdir), PDC_DATA_LOC=str(data))
    binary = pdc_binary()
    subprocess.run([binary, "up", "-n", "2", "--hosts", "node-a,node-b",
                    "--stage-producer-dir", str(work / "prod-{host}")],
                   env=env, check=True, stdout=subprocess.DEVNULL, timeout=120)
    os.environ["PDC_TMPDIR"] = str(tmpdir)
    os.environ.setdefault("PDC_TIMEOUT", "60")
    try:
        yield {"work": work, "tmpdir": tmpdir, "pdc": binary}
    finally:
        subprocess.run([binary, "down", "--tmpdir", str(tmpdir), "--timeout", "30s"],
                       env=env, stdout=subprocess.DEVNULL, timeout=120)


@pytest.fixture
def conn(cluster):
    with pdc.connect(tmpdir=str(cluster["tmpdir"])) as c:
        yield c


@pytest.fixture
def cont(conn, request):
    name = "py-%d-%s" % (os.getpid(), request.node.name)
    c = conn.create_container(name)
    yield c

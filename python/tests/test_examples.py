import os
import subprocess
import sys

import pdc

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def env(cluster, **kw):
    pkg = os.path.dirname(os.path.dirname(pdc.__file__))
    return dict(os.environ, PDC_TMPDIR=str(cluster["tmpdir"]),
                PYTHONPATH=pkg + os.pathsep + os.environ.get("PYTHONPATH", ""), **kw)


def test_vpic(cluster):
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, "vpic.py"), "--procs", "3", "--n", "20000",
                        "--run", "vpic-test-%d" % os.getpid()],
                       env=env(cluster), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "3 processes wrote and read back 20000 particles each" in r.stdout


def test_npy_stage(cluster, tmp_path):
    prod = cluster["work"] / "prod-node-a"
    ns = "npy-%d" % os.getpid()  # its own namespace: other tests' files are not its
    cons = subprocess.Popen([sys.executable, os.path.join(EXAMPLES, "npy_stage.py"), "consume", "4"],
                            env=env(cluster, PDC_HOST="node-b", PDC_STAGE_CONSUMER_DIR=str(tmp_path),
                                    PDC_STAGE_NAMESPACE=ns),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p = subprocess.run([sys.executable, os.path.join(EXAMPLES, "npy_stage.py"), "produce", "4"],
                       env=env(cluster, PDC_HOST="node-a", PDC_STAGE_PRODUCER_DIR=str(prod),
                               PDC_STAGE_NAMESPACE=ns),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out, err = cons.communicate(timeout=120)
    assert cons.returncode == 0, err
    assert "consumed 4 files" in out


def test_hdf5_roundtrip(cluster, tmp_path):
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, "hdf5_roundtrip.py"), str(tmp_path / "run.h5"),
                        "--particles", "50000", "--run", "h5-example-%d" % os.getpid()],
                       env=env(cluster), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "particles with energy > 0.9 MeV" in r.stdout and "checked against" in r.stdout, r.stdout

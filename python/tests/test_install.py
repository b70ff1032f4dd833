import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pdc import _lib

PROG = r"""
#include <stdio.h>
#include <pdc.h>
int main(void) {
    char buf[8];
    pdc_last_error(buf, sizeof buf);
    puts("linked");
    return 0;
}
"""


def test_pkg_config_prefix(tmp_path):
    """pdc.pc beside the libpdc the package loads names that install (not
    the dir it was built in): a C program builds and runs from its flags."""
    prefix = Path(_lib.path).resolve().parent.parent
    pcdir = prefix / "lib" / "pkgconfig"
    if not (pcdir / "pdc.pc").exists():
        pytest.skip("libpdc at %s has no pdc.pc beside it" % _lib.path)
    if shutil.which("pkg-config") is None or shutil.which("cc") is None:
        pytest.skip("no pkg-config or cc")
    env = dict(os.environ, PKG_CONFIG_PATH=str(pcdir))
    got = subprocess.run(["pkg-config", "--variable=prefix", "pdc"], env=env, capture_output=True, text=True, check=True)
    assert Path(got.stdout.strip()).resolve() == prefix
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "pdc"], env=env, capture_output=True, text=True,
                           check=True).stdout.split()
    src = tmp_path / "p.c"
    src.write_text(PROG)
    subprocess.run(["cc", "-o", str(tmp_path / "p"), str(src)] + flags, check=True, timeout=120)
    r = subprocess.run([str(tmp_path / "p")], env=dict(os.environ, LD_LIBRARY_PATH=""), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "linked\n", (r.returncode, r.stdout, r.stderr)

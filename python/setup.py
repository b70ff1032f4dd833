"""Builds libpdc into the package at install time (pip install ./python).

capi/install.sh (Go and a C compiler, no network beyond the Go module
cache) installs libpdc, its headers and the pdc binary into
pdc/_libpdc/, where the package finds them. Set PDC_LIBPDC to a built
libpdc.so to skip the build (the package then loads that one).
"""

import os
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildWithLibpdc(build_py):
    def run(self) -> None:
        super().run()
        if os.environ.get("PDC_LIBPDC"):
            return
        script = HERE.parent / "capi" / "install.sh"
        if not script.exists():
            raise SystemExit("pdc: building libpdc needs the pdc source tree (capi/install.sh "
                             "beside python/); or set PDC_LIBPDC to a built libpdc.so")
        prefix = Path(self.build_lib) / "pdc" / "_libpdc"
        subprocess.run(["bash", str(script), str(prefix.resolve())], check=True)


setup(cmdclass={"build_py": BuildWithLibpdc})

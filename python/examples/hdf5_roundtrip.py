"""An HDF5 round trip: a simulation's output file into pdc objects, a
query on the data servers, and the selected particles back out to HDF5.

    python3 hdf5_roundtrip.py run.h5 [--particles 100000] [--run NAME]

Writes run.h5 (an h5py file with /particles/{x,energy} and attributes)
if it does not exist, imports both datasets (attributes become tags),
finds the particles with energy above 0.9 on the data servers, reads x
where they are, and writes them with the tags to run-out.h5. The same
copies from a shell: `pdc import run.h5`, `pdc export OBJ out.h5`.
"""

import argparse
import os

import h5py
import numpy as np

import pdc


def main():
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("--particles", type=int, default=100_000)
    p.add_argument("--run", default="hdf5-example")
    a = p.parse_args()
    if not os.path.exists(a.file):
        rng = np.random.default_rng(7)
        with h5py.File(a.file, "w") as f:
            x = f.create_dataset("/particles/x", data=rng.random(a.particles, np.float32) * 100)
            x.attrs.update({"units": "um", "step": 40})
            e = f.create_dataset("/particles/energy", data=rng.random(a.particles))
            e.attrs["units"] = "MeV"

    with pdc.connect() as conn:
        cont = conn.create_container(a.run)
        # 1 MiB chunks: a file larger than memory imports the same way
        x = pdc.from_hdf5(a.file, "/particles/x", cont, a.run + "/x", chunk_bytes=1 << 20)
        energy = pdc.from_hdf5(a.file, "/particles/energy", cont, a.run + "/energy", chunk_bytes=1 << 20)
        print(f"imported {x.shape[0]} particles; x's tags: {dict(x.tags.items())}")

        hot = energy.query(energy > 0.9)  # evaluated on the data servers
        n = hot.nhits()
        xs, es = hot.values(of=x), hot.values()
        print(f"{n} particles with energy > 0.9 MeV")

        out = cont.create_object(a.run + "/hot-x", (max(n, 1),), np.float32)
        if n:
            out[:] = xs
        out.tags["energy_min"] = 0.9
        out.tags["units"] = x.tags["units"]
        dst = os.path.splitext(a.file)[0] + "-out.h5"
        if os.path.exists(dst):
            os.remove(dst)
        out.to_hdf5(dst, "/hot/x")

    with h5py.File(a.file, "r") as src, h5py.File(dst, "r") as f:
        want = src["/particles/energy"][...] > 0.9
        assert n == int(want.sum())
        np.testing.assert_array_equal(np.sort(f["/hot/x"][...][:n]), np.sort(src["/particles/x"][...][want]))
        assert (es > 0.9).all()
        assert f["/hot/x"].attrs["units"] == "um"
    print(f"wrote {n} particles to {dst}:/hot/x; checked against {a.file}")


if __name__ == "__main__":
    main()

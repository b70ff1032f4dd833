"""A producer/consumer pair passing .npy files through pdc's staging.

    # node-a (its pdc server serves PDC_STAGE_PRODUCER_DIR):
    PDC_STAGE_PRODUCER_DIR=/scratch/prod python3 npy_stage.py produce 10
    # node-b:
    PDC_STAGE_CONSUMER_DIR=/scratch/cons python3 npy_stage.py consume 10

On one machine, with the servers serving the producer dir:

    pdc up -n 2 --stage-producer-dir /tmp/prod
    PDC_STAGE_PRODUCER_DIR=/tmp/prod python3 npy_stage.py produce 10 &
    PDC_STAGE_CONSUMER_DIR=/tmp/cons python3 npy_stage.py consume 10
"""

import os
import sys

import numpy as np

import pdc


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("produce", "consume") or not sys.argv[2].isdigit():
        sys.exit("usage: npy_stage.py produce|consume COUNT (see the top of this file)")
    role, count = sys.argv[1], int(sys.argv[2])
    if role == "produce":
        root = os.environ["PDC_STAGE_PRODUCER_DIR"]
        os.makedirs(os.path.join(root, "steps"), exist_ok=True)
        for i in range(count):
            with pdc.open(os.path.join(root, "steps", f"{i}.npy"), "wb") as f:  # produced on close
                np.save(f, np.full(1000, i, np.float64))
    else:
        root = os.environ["PDC_STAGE_CONSUMER_DIR"]
        for i in range(count):
            with pdc.open(os.path.join(root, "steps", f"{i}.npy"), "rb", timeout=60) as f:  # waits for it
                a = np.load(f)
            assert (a == i).all(), i
        print(f"npy_stage.py: consumed {count} files")


if __name__ == "__main__":
    main()

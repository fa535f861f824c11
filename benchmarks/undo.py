"""What it costs to decide from the bytes which variables an undo must read.

A restore skips a group, or copies in only its changed chunks, when the live
objects already hold the checkpoint's content. It decides that by pickling the
live group again and hashing every chunk of its buffers; it no longer trusts
object ids. This measures, in one process on a namespace of large arrays where
one row changed:

- ``undo``: the undo as it is, which hashes everything and copies one chunk;
- ``undo, everything read``: the same undo with nothing compared (every group read);
- ``hash only``: hashing the live buffers alone, the price of deciding from the bytes
  (what an undo that trusted ids, as before, did not pay, and why it was unsound).

Usage: ``.venv/bin/python benchmarks/undo.py [--gib 4] [--repeat 3]``; writes ``results/undo.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

from jupyter_ckpt.capture import CHUNK
from jupyter_ckpt.checkpointer import Checkpointer
from jupyter_ckpt.restore import _chunk_keys
from jupyter_ckpt.store import Store, load_secret

RESULTS = Path(__file__).parent / "results"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=4.0, help="size of the namespace's arrays")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = int(args.gib * (1 << 30) / 8 / 1_000_000)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "store", load_secret(Path(tmp) / "secret"))
        module = types.ModuleType("__main__")
        ns = module.__dict__
        ns["table"] = np.random.default_rng(0).random((rows, 1_000_000))
        ckpt = Checkpointer(store, "undo.ipynb", module)
        ckpt.record_cell(1, "table = ...", True, 0.0)
        ckpt.save(trigger="cell")
        times: dict[str, list[float]] = {"undo": [], "undo, everything read": [], "hash only": []}
        for _ in range(args.repeat):
            for label in times:
                ns["table"][7, :] = -1.0  # the cell to undo changed one row
                ckpt.record_cell(2, "table[7, :] = -1.0", True, 0.0)
                ckpt.save(trigger="cell")
                started = time.perf_counter()
                if label == "hash only":
                    _chunk_keys(memoryview(ns["table"]).cast("B"))
                    ckpt.undo()  # untimed: back to the first state for the next round
                else:
                    if label == "undo, everything read":
                        ckpt._held = None
                    report = ckpt.undo()
                    assert ns["table"][7, 0] != -1.0, report.summary()
                times[label].append(time.perf_counter() - started)
    result = {
        "namespace_gib": args.gib,
        "chunk_mib": CHUNK >> 20,
        "median_s": {k: round(statistics.median(v), 3) for k, v in times.items()},
        "all_s": {k: [round(x, 3) for x in v] for k, v in times.items()},
        "python": sys.version.split()[0],
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "undo.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What it costs that no pickle stream is unpickled before its signature verifies.

A lazy restore maps large raw chunks from their files and verifies them in the
background. That is sound only for the memory of arrays, which nothing
unpickles: a pickle stream over ``LAZY_MIN`` that does not compress (a list of
random byte strings shared by two names) is read and verified before it is
unpickled, like every other stream. This measures, in one process, restoring
into a fresh namespace:

- ``arrays, lazy``: a namespace of large float arrays (``--gib``), mapped as before;
- ``arrays, read``: the same with ``lazy`` off, every byte read and verified (the floor of a full read);
- ``stream, verified``: a session whose large object is a pickle stream (``--stream-gib``), as it is restored now;
- ``stream, mapped``: the same stream mapped unverified, as the lazy restore did before (unsound: the
  price it saved).

Usage: ``.venv/bin/python benchmarks/lazy.py [--gib 4] [--stream-gib 1] [--repeat 3]``; writes
``results/lazy.json``. Rounds alternate; medians are reported. Page cache stays warm (no cache is
dropped: that would disturb the machine), so the times are lower bounds for a cold disk.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

from jupyter_ckpt.checkpointer import Checkpointer
from jupyter_ckpt.manifest import Manifest
from jupyter_ckpt.restore import LAZY_MIN, restore_namespace
from jupyter_ckpt.store import Store, load_secret

RESULTS = Path(__file__).parent / "results"


def _saved(store: Store, session: str, values: dict[str, object]) -> tuple[int, Manifest]:
    module = types.ModuleType("__main__")
    module.__dict__.update(values)
    checkpoint = Checkpointer(store, session, module).save(trigger="manual")
    assert checkpoint is not None
    return checkpoint, store.manifest(checkpoint)


def _restore(store: Store, checkpoint: int, manifest: Manifest, *, lazy: bool) -> float:
    fresh = types.ModuleType("__main__")
    started = time.perf_counter()
    report = restore_namespace(store.blobs, fresh, checkpoint, manifest, lazy=lazy)
    elapsed = time.perf_counter() - started
    assert not report.not_restored, report.summary()
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=4.0, help="size of the arrays of the array session")
    parser.add_argument("--stream-gib", type=float, default=1.0, help="size of the pickle stream of the other")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        secret = Path(tmp) / "secret"
        store = Store(Path(tmp) / "store", load_secret(secret))
        rng = np.random.default_rng(0)
        arrays = {f"a{i}": rng.random(int(args.gib * (1 << 30) / 8 / 4)) for i in range(4)}
        array_id, array_manifest = _saved(store, "arrays.ipynb", arrays)
        del arrays
        blob = [os.urandom(4096) for _ in range(int(args.stream_gib * (1 << 30) / 4096))]
        stream_id, stream_manifest = _saved(store, "stream.ipynb", {"big": blob, "alias": blob})
        del blob
        streams = [b for g in stream_manifest["groups"] for b in g["buffers"] if not b.get("mappable")]
        assert streams and max(b["size"] for b in streams) >= LAZY_MIN, "the stream is not large enough to map"
        as_before = copy.deepcopy(stream_manifest)  # the stream marked mappable, as every buffer was treated
        for group in as_before["groups"]:
            for buffer in group["buffers"]:
                buffer["mappable"] = True
        cases = {
            "arrays, lazy": lambda: _restore(store, array_id, array_manifest, lazy=True),
            "arrays, read": lambda: _restore(store, array_id, array_manifest, lazy=False),
            "stream, verified": lambda: _restore(store, stream_id, stream_manifest, lazy=True),
            "stream, mapped": lambda: _restore(store, stream_id, as_before, lazy=True),
        }
        times: dict[str, list[float]] = {label: [] for label in cases}
        for _ in range(args.repeat):
            for label, run in cases.items():
                times[label].append(run())
    median = {k: round(statistics.median(v), 3) for k, v in times.items()}
    result = {
        "arrays_gib": args.gib,
        "stream_gib": args.stream_gib,
        "median_s": median,
        "all_s": {k: [round(x, 3) for x in v] for k, v in times.items()},
        "stream_verified_over_mapped": round(median["stream, verified"] / median["stream, mapped"], 2),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "lazy.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

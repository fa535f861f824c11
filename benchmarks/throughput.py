"""Throughput on array data: jupyter-ckpt's checkpoint against pickle protocol 5 with out-of-band buffers.

Both take the same namespace of numpy arrays to durable files on the same disk:

- pickle 5: ``pickle.dumps(namespace, protocol=5, buffer_callback=...)``, then the stream and
  every out-of-band buffer written to one file, and one ``fsync``;
- jupyter-ckpt: what a background writer does for a checkpoint (``capture.prepare``): group,
  pickle, hash and sign every 4 MiB chunk, compress where it pays, write each blob, and fsync them together.

Throughput = the arrays' bytes / the wall time, median of alternating repetitions (the disk of a
shared VM is noisy). A second row per dataset writes the namespace again after one element changed:
pickle rewrites everything, jupyter-ckpt hashes and writes the one chunk that changed.

    python benchmarks/throughput.py [--scale 1] [--repeat 3]   # prints JSON

Memory is made to cost the same to touch in every run as ``run.py`` does (free page reporting off, free
memory touched first; ``--memory-as-found`` leaves it alone, as ``run.py`` asks, having done it already):
with reporting on, each fresh buffer of either tool could fault in the host, and pickle 5's own time
ranged 0.5-2.9 s over one run's repetitions.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pickle
import shutil
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from run import host_backed_memory  # this script's directory is on sys.path

from jupyter_ckpt import capture
from jupyter_ckpt.store import Store

WORK = Path(__file__).resolve().parent / "work"
GIB = 1 << 30


def datasets(scale: float) -> dict[str, dict[str, np.ndarray]]:
    """1 GiB each at scale 1: random doubles (incompressible) and integer labels (compressible)."""
    rng = np.random.default_rng(3)
    n = max(1, int(scale * GIB / 8 / 4))
    return {
        "float64, random": {f"x{i}": rng.random(n) for i in range(4)},
        "int64, labels": {f"y{i}": rng.integers(0, 1000, n) for i in range(4)},
    }


def pickle5(namespace: dict[str, Any], directory: Any) -> int:
    buffers: list[pickle.PickleBuffer] = []
    stream = pickle.dumps(namespace, protocol=5, buffer_callback=buffers.append)
    with open(directory / "namespace.pkl", "wb") as f:
        f.write(stream)
        for buffer in buffers:
            f.write(buffer.raw())
        f.flush()
        os.fsync(f.fileno())
    return (directory / "namespace.pkl").stat().st_size


def checkpoint(namespace: dict[str, Any], store: Any) -> int:
    module = types.ModuleType("__main__")
    module.__dict__.update(namespace)
    cap = capture.collect(module.__dict__, (), ())
    _, blobs = capture.prepare(store.blobs, module, cap, capture.Meta("throughput", None, None, "manual", "ok"))
    return sum(info.stored for info in blobs.values() if info.new)


Write = Callable[[dict[str, Any], Any], int]
# Each tool: where it writes (made before the clock starts), and the write.
TOOLS: dict[str, tuple[Callable[[Path], Any], Write]] = {
    "pickle5": (lambda directory: directory, pickle5),
    "jupyter-ckpt": (lambda directory: Store(directory, b"benchmark secret".ljust(32, b".")), checkpoint),
}


def timed(write: Write, namespace: dict[str, Any], target: Any) -> tuple[float, int]:
    os.sync()  # the previous write's dirty pages are not this one's to flush
    started = time.perf_counter()
    written = write(namespace, target)
    return time.perf_counter() - started, written


def measure(namespace: dict[str, np.ndarray], repeat: int) -> list[dict[str, Any]]:
    """Two rows: a first write, then a write after one element of one array changed."""
    logical = sum(a.nbytes for a in namespace.values())
    rows = []
    for case in ("first write", "after a one-element change"):
        seconds: dict[str, list[float]] = {"pickle5": [], "jupyter-ckpt": []}
        written: dict[str, int] = {}
        for _ in range(repeat):
            for name, (open_target, write) in TOOLS.items():
                directory = Path(tempfile.mkdtemp(prefix="throughput-", dir=WORK))
                try:
                    target = open_target(directory)
                    if case != "first write":
                        if write is checkpoint:
                            write(namespace, target)  # the previous checkpoint; pickle has nothing to build on
                        first = next(iter(namespace.values()))
                        first[len(first) // 2] += 1
                    s, written[name] = timed(write, namespace, target)
                    seconds[name].append(s)
                finally:
                    shutil.rmtree(directory, ignore_errors=True)
        rate = {name: logical / statistics.median(s) for name, s in seconds.items()}
        rows.append(
            {
                "case": case,
                "bytes": logical,
                "seconds": seconds,
                "written": written,
                "gb_per_s": {name: r / 1e9 for name, r in rate.items()},
                "ratio": rate["jupyter-ckpt"] / rate["pickle5"],
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=float(os.environ.get("BENCH_SCALE") or 1))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory-as-found", action="store_true", help="leave free page reporting as it is")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    with contextlib.redirect_stdout(sys.stderr), host_backed_memory(not args.memory_as_found) as memory:
        print(f"memory: {memory}")
        results = {name: measure(namespace, args.repeat) for name, namespace in datasets(args.scale).items()}
    json.dump(results, sys.stdout, indent=1)


if __name__ == "__main__":
    main()

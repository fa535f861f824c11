"""What a live child costs the cells that run beside it: copy-on-write faults, without any writing.

Runs the first cells of a benchmark notebook in this process, then its next cells again and again,
alternately alone and with a forked child that only sleeps (it shares every page, as a writer does, and
does nothing else). Prints the median time of those cells and the minor page faults they took::

    .venv/bin/python benchmarks/cow.py                     # analysis: cells 1-6, then 7-11, 3 times each
    .venv/bin/python benchmarks/cow.py --notebook smallobjs --setup 5 --cells 5

No tool is loaded: the difference between the two rows is what sharing the heap with a child costs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import statistics
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).parent


def cells(notebook: str) -> list[str]:
    doc = json.loads((HERE / "notebooks" / f"{notebook}.ipynb").read_text())
    return ["".join(c["source"]) for c in doc["cells"] if c["cell_type"] == "code"]


@contextlib.contextmanager
def sleeping_child() -> Iterator[None]:
    """A forked child that shares every page of this process and does nothing, for the ``with`` block."""
    pid = os.fork()
    if pid == 0:
        try:
            signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
            time.sleep(3600)
        finally:
            os._exit(0)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def run(module: types.ModuleType, sources: list[str], with_child: bool) -> tuple[float, int]:
    """Run ``sources`` in ``module``; returns seconds and minor faults, with a sleeping child alive or not."""
    with sleeping_child() if with_child else contextlib.nullcontext():
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter()
        for source in sources:
            exec(compile(source, "<cell>", "exec"), module.__dict__)
        return time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebook", default="analysis")
    parser.add_argument("--setup", type=int, default=6, help="cells run once first")
    parser.add_argument("--cells", type=int, default=5, help="cells after those, timed")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sources = cells(args.notebook)
    module = types.ModuleType("__main__")
    sys.modules["__main__"] = module
    for source in sources[: args.setup]:
        exec(compile(source, "<cell>", "exec"), module.__dict__)
    timed = sources[args.setup : args.setup + args.cells]
    results: dict[bool, list[tuple[float, int]]] = {False: [], True: []}
    for _ in range(args.repeat):
        for with_child in (False, True):
            results[with_child].append(run(module, timed, with_child))
    alone = statistics.median(t for t, _ in results[False])
    print(f"{args.notebook}: cells {args.setup + 1}-{args.setup + len(timed)}, median of {args.repeat}")
    print("| | seconds | minor faults | slower |")
    print("|---|--:|--:|--:|")
    for with_child, label in ((False, "alone"), (True, "with a sleeping child")):
        seconds = statistics.median(t for t, _ in results[with_child])
        faults = statistics.median(f for _, f in results[with_child])
        print(f"| {label} | {seconds:.2f} | {faults:,.0f} | {seconds / alone - 1:+.0%} |")


if __name__ == "__main__":
    main()

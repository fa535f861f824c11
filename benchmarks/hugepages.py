"""Why a fork gets slower after the kernel writes into huge pages that a child shares.

Allocates 4 GiB of numpy arrays (numpy asks for transparent huge pages), times a fork whose child
exits at once, then writes one value every 8 MiB of each array twice: once alone, once while a forked
child that only sleeps shares the pages. Prints how much of the arrays is still in huge pages and
what a fork costs after each::

    .venv/bin/python benchmarks/hugepages.py

No tool is loaded. A write to a huge page that a child shares splits it into 512 small pages, and
every later fork copies a page-table entry for each of them.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import numpy as np
from cow import sleeping_child  # this script's directory is on sys.path

GIB = 1 << 30


def fork_ms() -> float:
    """The parent's time in a fork whose child exits at once (the better of two)."""
    times = []
    for _ in range(2):
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        times.append(1000 * (time.perf_counter() - start))
        os.waitpid(pid, 0)
    return min(times)


def huge_mib() -> int:
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1]) >> 10
    return 0


def main() -> None:
    arrays = [np.ones(GIB // 8) for _ in range(4)]
    print("| | in huge pages | fork |")
    print("|---|--:|--:|")
    print(f"| 4 GiB of arrays | {huge_mib()} MiB | {fork_ms():.1f} ms |")
    for shared in (False, True):
        with sleeping_child() if shared else contextlib.nullcontext():
            for a in arrays:
                a[:: (8 << 20) // a.itemsize] += 1  # one small page in every fourth huge page
        label = "after writes beside a sleeping child" if shared else "after writes alone"
        print(f"| {label} | {huge_mib()} MiB | {fork_ms():.1f} ms |")


if __name__ == "__main__":
    main()

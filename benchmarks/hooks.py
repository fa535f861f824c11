"""What a checkpoint at a cell's end costs that cell, in a real kernel: its post-cell hooks, and the fork in them.

A kernel holds `longrun`'s state (two 64 MiB float64 arrays, which numpy keeps in huge pages) and runs
cells that rewrite both arrays for about 3 s, each followed by ``--idle`` seconds. ``max_lag`` is set so
short that the extension checkpoints at every cell's end, in its ``post_run_cell`` hook, as it does in
a Run All whose cells outlast ``max_lag``. Each ``--tree`` (a checkout of the project) is run in turn,
``--repeat`` rounds, alternated::

    .venv/bin/python benchmarks/hooks.py                                  # this checkout
    git worktree add /tmp/before HEAD~1
    .venv/bin/python benchmarks/hooks.py --tree /tmp/before --tree . --repeat 2

Prints per run the medians over the cells after the first two (by then a writer has shared the arrays
while a cell wrote them): the post-cell hooks (all of the extension's), the kernel's time in ``os.fork``
within them, the cell's own time, and how much of the kernel's memory is in huge pages at the end.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from jupyter_client.manager import start_new_kernel

# Marks around the extension's hooks (registered before it, and after it), and a clock on os.fork.
INSTRUMENTS = """
import os, time
_marks = []
def _mark(name):
    def hook(*args):
        if name == "pre":
            _marks.append({})
        _marks[-1][name] = time.monotonic()
    return hook
get_ipython().events.register("pre_run_cell", _mark("pre"))
get_ipython().events.register("post_run_cell", _mark("post_first"))
_fork = os.fork
def _timed_fork():
    start = time.monotonic()
    pid = _fork()
    if pid:
        _marks[-1]["fork"] = _marks[-1].get("fork", 0.0) + time.monotonic() - start
    return pid
os.fork = _timed_fork
"""
STATE = """
import numpy as np
rng = np.random.default_rng(7)
pos = rng.standard_normal((4_000_000, 2))
vel = rng.standard_normal((4_000_000, 2)) * 0.1
def advance(steps, stiffness, dt=0.01):
    global pos, vel
    for _ in range(steps):
        pos += vel * dt
        vel -= stiffness * pos * dt
"""
REPORT = (
    "__import__('json').dumps([_marks, [int(l.split()[1]) for l in open('/proc/self/smaps_rollup') "
    "if l.startswith('AnonHugePages:')]])"
)


def run(tree: Path, cells: int, idle: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="ckpt-hooks-") as home:
        return timed(tree, cells, idle, Path(home))


def timed(tree: Path, cells: int, idle: float, home: Path) -> dict[str, float]:
    env = dict(
        os.environ,
        PYTHONPATH=str(tree),
        JUPYTER_CKPT_DIR=str(home / "store"),
        JUPYTER_DATA_DIR=str(home / "data"),
        JPY_SESSION_NAME=str(home / "hooks.ipynb"),
    )
    manager, client = start_new_kernel(kernel_name="python3", env=env)
    try:

        def execute(code: str, silent: bool = False) -> dict:
            expressions = {} if silent else {"report": REPORT}
            reply = client.execute_interactive(
                code, silent=silent, user_expressions=expressions, timeout=600, output_hook=lambda msg: None
            )
            if reply["content"]["status"] != "ok":
                raise RuntimeError(f"{code!r} failed: {reply['content'].get('evalue')}")
            return reply["content"]

        execute(INSTRUMENTS, silent=True)
        execute("%load_ext jupyter_ckpt")
        execute("%config Checkpoints.max_lag = 0.01", silent=True)
        execute("get_ipython().events.register('post_run_cell', _mark('post_last'))", silent=True)
        execute(STATE)
        for i in range(cells):
            content = execute(f"advance(40, stiffness={0.5 + i / 10})")
            time.sleep(idle)
        marks, (huge_kib,) = json.loads(ast.literal_eval(content["user_expressions"]["report"]["data"]["text/plain"]))
    finally:
        manager.shutdown_kernel(now=True)
    timed = [m for m in marks if {"pre", "post_first", "post_last"} <= m.keys()][-cells:][2:]
    return {
        "hooks_ms": 1e3 * statistics.median(m["post_last"] - m["post_first"] for m in timed),
        "fork_ms": 1e3 * statistics.median(m.get("fork", 0.0) for m in timed),
        "cell_s": statistics.median(m["post_first"] - m["pre"] for m in timed),
        "huge_mib": huge_kib / 1024,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", type=Path, help="a checkout to run (repeatable; default: this one)")
    parser.add_argument("--cells", type=int, default=10, help="cells per run")
    parser.add_argument("--idle", type=float, default=3.0, help="seconds of idle after each cell")
    parser.add_argument("--repeat", type=int, default=1, help="alternated rounds")
    args = parser.parse_args()
    trees = [t.resolve() for t in args.tree or [Path(__file__).resolve().parent.parent]]
    print("| checkout | post-cell hooks ms | fork ms | cell s | in huge pages at the end |")
    print("|---|--:|--:|--:|--:|")
    for _ in range(args.repeat):
        for tree in trees:
            r = run(tree, args.cells, args.idle)
            print(
                f"| {tree} | {r['hooks_ms']:.1f} | {r['fork_ms']:.1f} | {r['cell_s']:.2f} | {r['huge_mib']:.0f} MiB |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

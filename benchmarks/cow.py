"""What a live child costs the cells that run beside it: copy-on-write faults and memory.

Time: runs the first cells of a benchmark notebook in this process, then its next cells again and again,
alternately alone and with a forked child that only sleeps (it shares every page, as a writer does, and
does nothing else). Prints the median time of those cells and the minor page faults they took::

    .venv/bin/python benchmarks/cow.py                     # analysis: cells 1-6, then 7-11, 3 times each
    .venv/bin/python benchmarks/cow.py --notebook smallobjs --setup 5 --cells 5

No tool is loaded: the difference between the two rows is what sharing the heap with a child costs.

Memory: ``--memory`` runs real kernels instead, each case once without a tool and once with
jupyter-ckpt, and samples every 20 ms the PSS summed over the kernel and its children (the writers;
PSS counts a page the kernel shares with a writer once in all), and the headroom (``memory.py``)::

    .venv/bin/python benchmarks/cow.py --memory            # about 2 minutes
    .venv/bin/python benchmarks/cow.py --memory --gib 1 --scale 0.25

The cases: the analysis notebook with 1.5 s of idle after each cell (each cell checkpointed, the writers
running beside the next cells); the worst case, a cell that rewrites the whole namespace in place (a
``--gib`` array, ``a += 1``) while the writer of the checkpoint before it runs, with the memory as found;
and the same with other processes holding all but three quarters of the array's size free, where only
the writer's watcher keeps the copies within the headroom. Prints each peak, their ratio, and the least
headroom seen.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import resource
import signal
import statistics
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "tests"))
from bystanders import GIB, leaving  # noqa: E402  (other processes holding memory, as the memory test's)


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


# -- peak memory, in real kernels ------------------------------------------------------------------


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (a writer is forked by whichever kernel thread saves)."""
    found, stack = [], [pid]
    while stack:
        pid = stack.pop()
        found.append(pid)
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{pid}/task").iterdir():
                stack += [int(c) for c in (task / "children").read_text().split()]
    return found


def sizes(pid: int) -> tuple[int, int]:
    """A process's PSS (its private pages, and its share of each page it shares) and USS (its private pages)."""
    fields: dict[str, int] = {}
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
            fields[line.split(":")[0]] = int(line.split()[1]) << 10
    return fields.get("Pss", 0), fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)


class Sampler:
    """The peak of the PSS summed over a kernel's process tree (and what its writers alone held then), and the
    least headroom, every ``interval`` seconds."""

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        from jupyter_ckpt import memory

        self._headroom = memory.headroom
        self.pid = pid
        self.peak = 0
        self.writers = 0
        self.least: int | None = None
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            kernel, *writers = [sizes(p) for p in tree(self.pid)]
            total = kernel[0] + sum(pss for pss, _ in writers)
            if total > self.peak:
                self.peak, self.writers = total, sum(uss for _, uss in writers)
            room = self._headroom()
            if room is not None:
                self.least = room.free if self.least is None else min(self.least, room.free)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class MemoryKernel:
    """A real ipykernel, with jupyter-ckpt (a store in a temp dir) or without any tool."""

    def __init__(self, tool: bool, tmp: Path, env: dict[str, str]) -> None:
        from jupyter_client.manager import KernelManager

        env = {**os.environ, **env, "JUPYTER_CKPT_DIR": str(tmp / "store"), "JUPYTER_DATA_DIR": str(tmp / "data")}
        self.manager = KernelManager(kernel_name="python3")
        self.manager.start_kernel(env={**env, "JPY_SESSION_NAME": str(tmp / "cow.ipynb")})
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)
        self.pid = int(self.manager.provisioner.process.pid)  # type: ignore[union-attr]
        self.tool = tool
        self.stderr = ""
        if tool:
            self.run("%load_ext jupyter_ckpt")

    def run(self, code: str) -> None:
        def hook(msg: dict[str, Any]) -> None:
            if msg["msg_type"] == "stream" and msg["content"]["name"] == "stderr":
                self.stderr += msg["content"]["text"]

        reply = self.client.execute_interactive(code, output_hook=hook, timeout=600)
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"{code[:60]!r}: {reply['content'].get('evalue')}")

    def value(self, expr: str) -> Any:
        """An expression's value from a silent request: no cell, so no checkpoint."""
        msg_id = self.client.execute("", silent=True, user_expressions={"v": expr})
        while (reply := self.client.get_shell_msg(timeout=60))["parent_header"].get("msg_id") != msg_id:
            pass
        return ast.literal_eval(reply["content"]["user_expressions"]["v"]["data"]["text/plain"])

    def drain(self) -> None:
        if self.tool:
            self.run("%checkpoint wait")  # a cell: what the writers reported is printed at its end

    def stop(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


def interactive(notebook: str) -> Callable[[MemoryKernel], None]:
    def run(kernel: MemoryKernel) -> None:
        for source in cells(notebook):
            kernel.run(source)
            time.sleep(1.5)  # the idle after which the cell is checkpointed

    return run


def rewrite(gib: float) -> Callable[[MemoryKernel], None]:
    def run(kernel: MemoryKernel) -> None:
        kernel.run(f"import numpy as np\na = np.arange({int(gib * GIB) // 8}, dtype=float)")  # compresses: a long write
        deadline = time.monotonic() + 10
        while kernel.tool and not kernel.value("__import__('jupyter_ckpt').extension.active().status()['writing']"):
            assert time.monotonic() < deadline, "no writer started"
            time.sleep(0.05)
        time.sleep(0.5)  # the tool-free run idles as long
        kernel.run("a += 1")
        time.sleep(1.5)

    return run


def measure(plan: Callable[[MemoryKernel], None], tool: bool, env: dict[str, str], leave: int | None) -> dict[str, Any]:
    """One run of ``plan`` in a new kernel (with other processes leaving it ``leave`` bytes of headroom, if
    given): its peak, the least headroom, whether a writer was stopped."""
    with tempfile.TemporaryDirectory() as tmp:
        kernel = MemoryKernel(tool, Path(tmp), env)
        try:
            with leaving(leave) if leave is not None else contextlib.nullcontext():
                sampler = Sampler(kernel.pid)
                start = time.monotonic()
                plan(kernel)
                kernel.drain()
                sampler.stop()
        finally:
            kernel.stop()
    stopped = "stopped a checkpoint writer" in kernel.stderr
    seconds = time.monotonic() - start
    return {"peak": sampler.peak, "writers": sampler.writers, "least": sampler.least, "stopped": stopped, "s": seconds}


def memory_main(args: argparse.Namespace) -> None:
    from jupyter_ckpt import memory

    env = {"BENCH_SCALE": str(args.scale), "PYTHONHASHSEED": "0"}
    room = memory.headroom()
    cases: list[tuple[str, Callable[[MemoryKernel], None], int | None]] = [
        (f"{args.notebook}, 1.5 s idle after each cell", interactive(args.notebook), None),
        (f"worst case: {args.gib:g} GiB rewritten in place beside its writer", rewrite(args.gib), None),
        # The array and three quarters of it: the fork check (half the kernel) passes, the copies would not fit.
        ("the same, other processes leaving 1.75x the array free", rewrite(args.gib), int(1.75 * args.gib * GIB)),
    ]
    print(f"peak PSS of kernel and writers, sampled every 20 ms (headroom at start: {room})")
    print(
        "| case | no tool | jupyter-ckpt | ratio | of which writers' own | least headroom (no tool / jupyter-ckpt) "
        "| writer stopped | seconds |"
    )
    print("|---|--:|--:|--:|--:|--:|:-:|--:|")
    for label, plan, leave in cases:
        base, ours = measure(plan, False, env, leave), measure(plan, True, env, leave)
        least = " / ".join(f"{r['least'] / GIB:.2f} GiB" for r in (base, ours))
        print(
            f"| {label} | {base['peak'] / GIB:.2f} GiB | {ours['peak'] / GIB:.2f} GiB | "
            f"{ours['peak'] / base['peak']:.2f}x | {ours['writers'] / GIB:.2f} GiB | {least} | "
            f"{'yes' if ours['stopped'] else 'no'} | "
            f"{base['s']:.0f} / {ours['s']:.0f} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebook", default="analysis")
    parser.add_argument("--setup", type=int, default=6, help="cells run once first")
    parser.add_argument("--cells", type=int, default=5, help="cells after those, timed")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory", action="store_true", help="peak memory of kernel and writers, in real kernels")
    parser.add_argument("--gib", type=float, default=2.0, help="--memory: the worst case's array")
    parser.add_argument("--scale", type=float, default=1.0, help="--memory: the notebook's BENCH_SCALE")
    args = parser.parse_args()
    if args.memory:
        memory_main(args)
        return
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

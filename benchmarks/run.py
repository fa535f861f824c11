"""Run the benchmark notebooks under no tool, jupyter-ckpt, dill.dump_module and Kishu; write the tables.

Every notebook in benchmarks/notebooks runs in a real kernel (jupyter_client) in three patterns
(run all, cell by cell, interactive), once per mode in each round (--repeat): no tool first, then no tool
again (with the first, the reference), no tool a third time (the noise floor), fork only (a bare fork per
cell: the floor of a forking tool), jupyter-ckpt, and, cell by cell in the first round, dill and kishu,
in an order that turns from round to round.
See benchmarks/README.md for what each number means.

    python benchmarks/run.py             # one round, about 25 minutes on 2 cores
    python benchmarks/run.py --repeat 3  # what `make bench` runs: rows are medians of three rounds
    python benchmarks/run.py --quick     # smoke run at 2% of the sizes
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import platform
import queue
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from cow import Sampler  # this script's directory is on sys.path
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

BENCH = Path(__file__).resolve().parent
NOTEBOOKS = BENCH / "notebooks"
RESULTS = BENCH / "results"
WORK = BENCH / "work"
KISHU_VENV = WORK / "kishu-venv"
KISHU_VERSION = "0.3.4"
# Kishu's venv gets our versions of everything the notebooks and the instruments import.
SHARED_PACKAGES = ("numpy", "pandas", "scikit-learn", "scipy", "dill", "ipykernel", "ipython", "xxhash")
BASELINE_CAP = 1800.0  # the cap is for tools; the baseline only needs a safety net
HISTORY = {"history": "__import__('benchkernel').history()"}
# How cells are sent: every request at once (JupyterLab's Run All), each after the previous reply (nbclient,
# papermill), or each after the previous reply and 1-3 s of a person reading it.
PATTERNS = ("run all", "cell by cell", "interactive")
DIGEST = {"digest": "__import__('benchkernel').digest(get_ipython())"}
THROUGHPUT_REPEAT = 3


class KernelError(Exception):
    """A cell raised; the message is the kernel's."""


@dataclass
class Reply:
    start: float  # time.monotonic() at execute_request
    end: float  # time.monotonic() at the idle status
    values: dict[str, Any]
    error: str | None = None

    @property
    def seconds(self) -> float:
        return self.end - self.start


class Kernel:
    """One ipykernel in a given interpreter, driven over ZMQ like a frontend does."""

    def __init__(self, python: Path, env: dict[str, str], log: Path) -> None:
        specs = WORK / "kernelspecs"
        spec = specs / ("bench-" + python.parent.parent.name.lstrip("."))
        spec.mkdir(parents=True, exist_ok=True)
        argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": spec.name, "language": "python"}))
        self.manager = KernelManager(kernel_name=spec.name, kernel_spec_manager=KernelSpecManager(kernel_dirs=[specs]))
        with log.open("ab") as stderr:  # the kernel's own warnings and the tools' notices
            self.manager.start_kernel(env=env, stderr=stderr)
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)
        self.pid: int = self.manager.provisioner.process.pid  # type: ignore[union-attr]

    def send(self, code: str, *, silent: bool = False, expressions: dict[str, str] | None = None) -> str:
        """Send an execute request without waiting; returns its id."""
        msg_id: str = self.client.execute(
            code, silent=silent, store_history=not silent, user_expressions=expressions or {}, allow_stdin=False
        )
        return msg_id

    def wait(self, msg_ids: list[str], start: float, *, timeout: float) -> list[Reply]:
        """The replies to requests sent at ``start``, each ending at its idle status, in the order sent.

        Raises KernelError if one failed, TimeoutError after ``timeout`` seconds.
        """
        pending = {m: Reply(start, 0.0, {}) for m in msg_ids}
        left = set(msg_ids)
        while left:
            msg = self._next(self.client.get_iopub_msg, start + timeout)
            reply = pending.get(msg["parent_header"].get("msg_id"))
            if reply is None:
                continue
            if msg["msg_type"] == "error":
                reply.error = f"{msg['content']['ename']}: {msg['content']['evalue']}"
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                reply.end = time.monotonic()
                left.discard(msg["parent_header"]["msg_id"])
        unanswered = set(msg_ids)  # a reply left by an earlier request (a second kernel_info) may come first
        while unanswered:
            content = self._next(self.client.get_shell_msg, time.monotonic() + 30)
            msg_id = content["parent_header"].get("msg_id")
            if msg_id not in unanswered:
                continue
            unanswered.discard(msg_id)
            reply = pending[msg_id]
            content = content["content"]
            if content["status"] != "ok":
                raise KernelError(reply.error or f"{content.get('ename')}: {content.get('evalue')}")
            for name, result in content.get("user_expressions", {}).items():
                if result["status"] != "ok":
                    raise KernelError(f"{name}: {result['ename']}: {result['evalue']}")
                reply.values[name] = ast.literal_eval(result["data"]["text/plain"])
        return [pending[m] for m in msg_ids]

    def run(
        self, code: str, *, timeout: float, silent: bool = False, expressions: dict[str, str] | None = None
    ) -> Reply:
        """Execute ``code``; raises KernelError if it fails, TimeoutError after ``timeout`` seconds.

        A silent execution fires no pre/post_run_cell hooks, so no tool checkpoints it.
        """
        start = time.monotonic()
        return self.wait([self.send(code, silent=silent, expressions=expressions)], start, timeout=timeout)[0]

    @staticmethod
    def _next(get: Any, deadline: float) -> dict[str, Any]:
        try:
            return get(timeout=max(deadline - time.monotonic(), 0.001))  # type: ignore[no-any-return]
        except queue.Empty:
            raise TimeoutError from None

    def digest(self, timeout: float) -> dict[str, str]:
        return json.loads(self.run("", silent=True, expressions=DIGEST, timeout=timeout).values["digest"])

    def stop(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


def tree_bytes(*paths: Path) -> int:
    return sum(f.stat().st_size for p in paths for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file())


class Mode:
    """No tool: the baseline. Subclasses attach a tool and say how to undo and restore with it."""

    name = "baseline"
    python = Path(sys.executable)
    # The undo as a user types it, a cell of its own (so the tool's hooks see it), or a silent request.
    undo_as_cell = False

    def __init__(self, tmp: Path, notebook: Path) -> None:
        self.tmp = tmp
        self.notebook = notebook  # a copy in tmp
        self.store = tmp / "store"

    def env(self) -> dict[str, str]:
        return {}

    def attach(self, kernel: Kernel, timeout: float) -> None:
        """Turn the tool on, before the notebook's first cell."""

    def after_cell(self) -> None:
        """Called between cells, outside every measured interval."""

    def finish(self, kernel: Kernel, timeout: float) -> dict[str, Any]:
        """After the last cell: wait for the tool to be durable; return drain seconds, checkpoints and refs."""
        return {"drain_s": 0.0, "checkpoints": 0}

    def stored_bytes(self) -> int:
        return tree_bytes(self.store) if self.store.exists() else 0

    def undo(self, info: dict[str, Any]) -> str | None:
        """Code, run in the live kernel, that goes back to the state before the last cell."""
        return None

    def restore(self, info: dict[str, Any]) -> str | None:
        """Code, run in a new kernel, that restores the state after the last cell."""
        return None

    def restore_full(self, info: dict[str, Any]) -> str | None:
        """The same, reading every byte before it returns, if the tool's restore is lazy."""
        return None

    def read_restored(self, info: dict[str, Any]) -> tuple[float, int] | None:
        """Seconds and bytes to read the files of the state ``restore`` loads, one after the other, as ``cat`` would."""
        return None


class Again(Mode):
    """The baseline run a second time: its "added time" and pauses show the measurement's noise."""

    name = "no tool, again"


class JupyterCkpt(Mode):
    name = "jupyter-ckpt"
    undo_as_cell = True  # `%checkpoint undo` in a cell: it knows no code ran since the last cell

    def env(self) -> dict[str, str]:
        return {"JUPYTER_CKPT_DIR": str(self.store), "JPY_SESSION_NAME": str(self.notebook)}

    def attach(self, kernel: Kernel, timeout: float) -> None:
        kernel.run("%load_ext jupyter_ckpt", timeout=timeout)  # a normal first cell, as a user would

    def finish(self, kernel: Kernel, timeout: float) -> dict[str, Any]:
        drain = kernel.run("__import__('jupyter_ckpt').wait()", silent=True, timeout=timeout)
        records = "[(r.id, r.cell) for r in __import__('jupyter_ckpt').list()]"
        rows = kernel.run("", silent=True, expressions={"ids": records}, timeout=timeout).values["ids"]
        # Execution count 1 is the %load_ext cell: the notebook's cell i ran as count i + 2.
        saved = sorted({cell - 2 for _, cell in rows if cell is not None and cell >= 2})
        last = rows[-1][0] if rows else None
        return {"drain_s": drain.seconds, "checkpoints": len(rows), "last": last, "saved_cells": saved}

    def undo(self, info: dict[str, Any]) -> str:
        return "%checkpoint undo"

    def restore(self, info: dict[str, Any]) -> str:
        # `latest` before the undo: the undo itself put a restore entry on the timeline.
        return f"%load_ext jupyter_ckpt\n%checkpoint restore {info['last']}"

    def restore_full(self, info: dict[str, Any]) -> str:
        return "%config Checkpoints.lazy_restore = False\n" + self.restore(info)

    def read_restored(self, info: dict[str, Any]) -> tuple[float, int]:
        db = sqlite3.connect(self.store / "catalog.sqlite")
        keys = [k for (k,) in db.execute("SELECT blob FROM refs WHERE checkpoint_id=?", (info["last"],))]
        db.close()
        buf = bytearray(8 << 20)
        read = 0
        start = time.monotonic()
        for key in keys:
            with open(self.store / "blobs" / key[:2] / key, "rb", buffering=0) as f:
                while n := f.readinto(buf):
                    read += n
        return time.monotonic() - start, read


class ForkOnly(Mode):
    """Not a tool: a fork after every cell, the child exiting at once. Its pause and added time are
    what any tool that forks the kernel per cell pays on this machine before it does any work."""

    name = "fork only"

    def attach(self, kernel: Kernel, timeout: float) -> None:
        kernel.run("__import__('benchkernel').fork_every_cell(get_ipython())", silent=True, timeout=timeout)


class Dill(Mode):
    name = "dill"

    def __init__(self, tmp: Path, notebook: Path) -> None:
        super().__init__(tmp, notebook)
        self.written: dict[str, int] = {}

    def attach(self, kernel: Kernel, timeout: float) -> None:
        self.store.mkdir()
        code = f"__import__('benchkernel').dump_every_cell(get_ipython(), {str(self.store)!r})"
        kernel.run(code, silent=True, timeout=timeout)

    def after_cell(self) -> None:
        """Count each new file's bytes, then keep only the last two files (disk space)."""
        files = sorted(self.store.glob("*.pkl"))
        for f in files:
            self.written.setdefault(f.name, f.stat().st_size)
        for f in files[:-2]:
            f.unlink()

    def finish(self, kernel: Kernel, timeout: float) -> dict[str, Any]:
        files = sorted(self.store.glob("*.pkl"))
        return {"drain_s": 0.0, "checkpoints": len(self.written), "files": [str(f) for f in files[-2:]]}

    def stored_bytes(self) -> int:
        return sum(self.written.values())

    def undo(self, info: dict[str, Any]) -> str:
        return f"__import__('dill').load_module({info['files'][0]!r})"

    def restore(self, info: dict[str, Any]) -> str:
        return f"__import__('dill').load_module({info['files'][1]!r})"


class Kishu(Mode):
    name = "kishu"
    python = KISHU_VENV / "bin" / "python"

    def env(self) -> dict[str, str]:
        # Kishu keeps its database next to the notebook and its config under $KISHU_PATH_ROOT/.kishu.
        return {
            "TEST_NOTEBOOK_PATH": str(self.notebook),
            "ENV_KISHU_TEST_MODE": "true",
            "KISHU_PATH_ROOT": str(self.store),
        }

    def attach(self, kernel: Kernel, timeout: float) -> None:
        kernel.run("from kishu import init_kishu\n\ninit_kishu()", timeout=timeout)

    def finish(self, kernel: Kernel, timeout: float) -> dict[str, Any]:
        graph = "_kishu._kishu_graph"
        expressions = {
            "head": f"{graph}.head()",
            "parent": f"{graph}.get_commit().parent_id",
            "count": f"len({graph}.list_history())",
        }
        values = kernel.run("", silent=True, expressions=expressions, timeout=timeout).values
        return {"drain_s": 0.0, "checkpoints": values["count"], "head": values["head"], "parent": values["parent"]}

    def stored_bytes(self) -> int:
        return super().stored_bytes() + tree_bytes(*self.tmp.glob("*.kishudb*"))

    def undo(self, info: dict[str, Any]) -> str:
        return f"_kishu.checkout({info['parent']!r})"

    def restore(self, info: dict[str, Any]) -> str:
        return f"from kishu import init_kishu\ninit_kishu()\n_kishu.checkout({info['head']!r})"


MODES: tuple[type[Mode], ...] = (Mode, Again, ForkOnly, JupyterCkpt, Dill, Kishu)


def compare(expected: dict[str, str], got: dict[str, str]) -> list[str]:
    """The variables that differ (~name), are missing (-name) or extra (+name); empty if all match."""
    diffs = [f"~{n}" for n in expected if n in got and got[n] != expected[n]]
    return diffs + [f"-{n}" for n in expected if n not in got] + [f"+{n}" for n in got if n not in expected]


def run_cells(kernel: Kernel, cells: list[str], pattern: str, timeout: float, seed: int) -> list[Reply]:
    """Run the notebook's cells as ``pattern`` sends them; each reply ends at its cell's idle status."""
    if pattern == "run all":
        start = time.monotonic()
        return kernel.wait([kernel.send(c) for c in cells], start, timeout=timeout)
    pauses = random.Random(seed)
    replies = []
    for source in cells:
        replies.append(kernel.run(source, timeout=timeout - (time.monotonic() - replies[0].start if replies else 0)))
        if pattern == "interactive":
            time.sleep(pauses.uniform(1.0, 3.0))  # a person reads the output before the next cell
    return replies


def run_session(
    mode: Mode,
    cells: list[str],
    pattern: str,
    env: dict[str, str],
    cap: float,
    reference: dict[str, Any] | None,
    log: Path,
) -> dict[str, Any]:
    """Run the notebook under one mode and pattern; after a cell-by-cell run, also undo in the live kernel and
    restore in a new one."""
    out: dict[str, Any] = {"pattern": pattern, "cell_s": [], "pause_s": [], "hooks_s": [], "fork_s": [], "usage": []}
    env = {**env, **mode.env()}
    kernel = Kernel(mode.python, env, log)
    # The peak of the kernel's and its writers' memory (PSS), every 0.2 s: cheap enough beside the cells.
    sampler = Sampler(kernel.pid, interval=0.2)
    started = time.monotonic()
    phase = "run"
    full = pattern == "cell by cell"  # undo and restores are measured once, on the plainest pattern
    try:
        kernel.run("__import__('benchkernel').install(get_ipython())", silent=True, timeout=60)
        mode.attach(kernel, timeout=120)
        kernel.run("__import__('benchkernel').reorder(get_ipython())", silent=True, timeout=60)
        if full:
            replies = run_cells(kernel, cells[:-1], pattern, cap, seed=len(cells))
            out["digest_before_last"] = kernel.digest(timeout=600)
            time.sleep(1.0)  # a person looks before the last cell, so that cell is the one the undo undoes
            replies += run_cells(kernel, cells[-1:], pattern, cap - (time.monotonic() - started), seed=0)
        else:
            replies = run_cells(kernel, cells, pattern, cap, seed=len(cells))
        marks = json.loads(kernel.run("pass", silent=True, expressions=HISTORY, timeout=60).values["history"])
        marks = marks[-len(cells) :]
        previous_end = replies[0].start
        for reply, m in zip(replies, marks, strict=True):
            # Run All sends everything at once: a cell takes from the previous one's idle to its own.
            out["cell_s"].append(reply.end - (previous_end if pattern == "run all" else reply.start))
            previous_end = reply.end
            # What the user waits for beyond the code: the tool's pre-cell hooks, its post-cell hooks and the reply.
            out["pause_s"].append((m["pre_last"] - m["pre_first"]) + (reply.end - m["post_first"]))
            out["hooks_s"].append(m["post_last"] - m["post_first"])
            out["fork_s"].append(m["fork_s"])
            # The cell's own code: the kernel's user and system CPU seconds, and its minor faults.
            out["usage"].append([b - a for a, b in zip(m["pre_last_usage"], m["post_first_usage"], strict=True)])
        out.update(mode.finish(kernel, timeout=max(cap - (time.monotonic() - started), 60)))
        sampler.stop()
        out["peak_bytes"] = sampler.peak
        out["bytes"] = mode.stored_bytes()
        out["gap_s"] = largest_gap(out["cell_s"], out.pop("saved_cells", None))
        if not full:
            return out
        out["digest"] = kernel.digest(timeout=600)
        if reference is None:
            return out
        out["run_diffs"] = compare(reference["digest"], out["digest"])
        undo = mode.undo(out)
        if undo is None:
            return out
        phase = "undo"
        out["undo_s"] = kernel.run(undo, silent=not mode.undo_as_cell, timeout=cap).seconds
        out["undo_diffs"] = compare(reference["digest_before_last"], kernel.digest(timeout=600))
    except (TimeoutError, KernelError) as e:
        reason = f"timed out after {cap:.0f} s" if isinstance(e, TimeoutError) else f"error: {e}"
        if phase == "run" and isinstance(e, TimeoutError):  # the time spent so far, for a lower bound
            out["timed_out_at_s"] = time.monotonic() - started
        if phase == "undo":
            out["undo_failed"] = reason[:300]
        else:
            out["failed"] = f"{reason} ({len(out['cell_s'])}/{len(cells)} cells)"[:300]
    finally:
        sampler.stop()
        out.setdefault("bytes", mode.stored_bytes())
        kernel.stop()
    if "failed" in out or not full:
        return out
    read = mode.read_restored(out)
    if read is not None:
        out["read_s"], out["read_bytes"] = read
    for key, code in (("restore", mode.restore(out)), ("full_restore", mode.restore_full(out))):
        if code is None:
            continue
        fresh = Kernel(mode.python, env, log)
        try:
            out[f"{key}_s"] = fresh.run(code, silent=True, timeout=cap).seconds
            out[f"{key}_diffs"] = compare(reference["digest"], fresh.digest(timeout=600))
        except (TimeoutError, KernelError) as e:
            failed = f"timed out after {cap:.0f} s" if isinstance(e, TimeoutError) else f"error: {e}"
            out[f"{key}_failed"] = failed[:300]
        finally:
            fresh.stop()
    return out


def largest_gap(cell_s: list[float], saved: list[int] | None) -> float | None:
    """The most seconds of execution between two checkpointed cell ends (or the start), if the tool says which
    cells it checkpointed (by position in the notebook); None if it does not."""
    if saved is None:
        return None
    gap = largest = 0.0
    for i, seconds in enumerate(cell_s):
        gap += seconds
        largest = max(largest, gap)
        if i in saved:
            gap = 0.0
    return largest


def notebook_cells(path: Path) -> list[str]:
    nb = json.loads(path.read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def ensure_kishu_venv() -> None:
    """Kishu and its dependencies live in their own venv, with our versions of the shared packages."""
    if Kishu.python.exists():
        return
    print(f"creating {KISHU_VENV} (once, about 2 minutes)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(KISHU_VENV)], check=True)
    pins = [f"kishu=={KISHU_VERSION}"] + [f"{p}=={version(p)}" for p in SHARED_PACKAGES]
    subprocess.run([str(Kishu.python), "-m", "pip", "install", "--quiet", *pins], check=True)


def warm_up(modes: list[type[Mode]], notebooks: dict[str, list[str]], env: dict[str, str]) -> None:
    """Import everything once per interpreter, so no measured run pays a cold page cache for it."""
    for python in {m.python for m in modes}:
        kernel = Kernel(python, env, WORK / "warm-up.log")
        try:
            for cells in notebooks.values():
                kernel.run(cells[0], silent=True, timeout=300)
        finally:
            kernel.stop()


# -- the report ---------------------------------------------------------------------------------


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def fastest(*runs: dict[str, Any]) -> dict[str, Any]:
    """Per cell, the lowest time and pause over two complete no-tool runs: the reference for every tool."""
    done = [r for r in runs if "failed" not in r]
    ref = {k: [min(values) for values in zip(*(r[k] for r in done), strict=True)] for k in ("cell_s", "pause_s")}
    # The CPU the cells' code used, of the run whose cells took less time in all.
    ref["usage"] = min(done, key=lambda r: sum(r["cell_s"]))["usage"]
    return ref


def summarize(result: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """Per-cell pause and added time relative to the same cells of the reference.

    A run that timed out gets a lower bound: the cell time it had spent, minus the reference's whole run.
    """
    n = len(result["cell_s"])
    pauses = [t - b for t, b in zip(result["pause_s"], ref["pause_s"], strict=False)]
    if "timed_out_at_s" in result:
        added, base, lower_bound = result["timed_out_at_s"] - sum(ref["cell_s"]), sum(ref["cell_s"]), True
    else:
        added, base, lower_bound = sum(result["cell_s"]) - sum(ref["cell_s"][:n]), sum(ref["cell_s"][:n]), False
    summary = {"cells": n, "added_s": added, "added_pct": 100 * added / base if base else None}
    summary["lower_bound"] = lower_bound
    if pauses:
        summary.update(pause_p50_ms=1000 * percentile(pauses, 50), pause_p95_ms=1000 * percentile(pauses, 95))
    for key in ("hooks", "fork"):
        values = result[f"{key}_s"]
        if any(values):
            summary.update({f"{key}_p{q}_ms": 1000 * percentile(values, q) for q in (50, 95)})
    if result.get("usage") and ref.get("usage") and not lower_bound:
        # Where the added time goes: the kernel's own extra user and system time (copies on write are system
        # time), and the rest, the time the cells' thread waited to run (a writer beside it on the cores).
        user, system, faults = (
            sum(u[i] for u in result["usage"]) - sum(u[i] for u in ref["usage"][:n]) for i in range(3)
        )
        summary.update(added_user_s=user, added_system_s=system, added_faults=faults, waited_s=added - user - system)
    return summary


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError


def cell(value: Any, fmt: str = "{:.0f}") -> str:
    return "–" if value is None else fmt.format(value)


def read_cell(r: dict[str, Any]) -> str:
    if "read_s" not in r:
        return "–"
    return f"{r['read_s']:.2f} ({human_bytes(r['read_bytes'])})"


def matches(diffs: list[str] | None) -> str:
    if diffs is None:
        return "–"
    return "yes" if not diffs else f"no ({len(diffs)}): " + ", ".join(diffs[:3]) + (", …" if len(diffs) > 3 else "")


def ratio(peer: float | None, ours: float | None) -> str:
    if peer is None or ours is None:
        return "–"
    if ours <= 0:
        return "∞" if peer > 0 else "1×"
    return f"{peer / ours:.3g}×"


def median_run(results: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    """The run of median added time (the higher one of an even count), and the range over all, if more than one."""
    # By the percentage shown (the references differ by round); a run without one (no cell ran) sorts last.
    ordered = sorted(results, key=lambda r: (r["summary"]["added_pct"] is None, r["summary"]["added_pct"] or 0))
    if len(ordered) == 1:
        return ordered[0], ""
    low, high = (cell(r["summary"]["added_pct"], "{:.1f}") for r in (ordered[0], ordered[-1]))
    return ordered[len(ordered) // 2], f" ({low}…{high}, {len(ordered)} runs)"


def beyond_noise(rounds: list[dict[str, Any]], name: str) -> str:
    """A tool's added time minus the noise run's in the same round, median and range over the rounds.

    Both are measured against the same reference, the per-cell faster of two runs, which any third run
    exceeds by chance: the difference takes that bias and the round's drift out, leaving the tool's own cost.
    """
    if name == Again.name:
        return "–"
    pairs = [(e["tools"][name]["summary"], e["tools"][Again.name]["summary"]) for e in rounds if name in e["tools"]]
    diffs = sorted(
        t["added_pct"] - a["added_pct"]
        for t, a in pairs
        if not t["lower_bound"] and t["added_pct"] is not None and a["added_pct"] is not None
    )
    if not diffs:
        return "–"
    spread = f" ({diffs[0]:.1f}…{diffs[-1]:.1f})" if len(diffs) > 1 else ""
    return f"{diffs[len(diffs) // 2]:.1f}%{spread}"


def markdown(report: dict[str, Any]) -> str:
    meta = report["meta"]
    lines = [
        f"# Benchmark results, {meta['started']}",
        "",
        f"Machine: {meta['machine']}. Scale {meta['scale']} (BENCH_SCALE); a tool's run is capped at "
        f"{meta['cap']:g}× the baseline run (at least {meta['min_cap_s']:.0f} s); "
        f"total wall time {meta['wall_s'] / 60:.1f} min. jupyter-ckpt {meta['versions']['jupyter-ckpt']} "
        f"(git {meta['git']}), dill {meta['versions']['dill']}, Kishu {KISHU_VERSION}. "
        f"Memory: {meta.get('memory', 'as found')}. Rounds: {meta.get('repeat', 1)}, each running every mode once "
        "against a reference of its own; with more than one, a row shows the run of median added time, with the "
        "range over the rounds.",
        "",
        "Patterns: run all = every request sent at once (JupyterLab's Run All); cell by cell = each sent after the "
        "previous reply (nbclient, papermill); interactive = each after the previous reply and 1-3 s of idle. "
        "Pause = what a cell waits beyond its code (the tool's pre-cell hooks, its post-cell hooks and the "
        "reply), minus the reference's, per cell. Reference = per cell, the faster of two "
        "no-tool runs; the 'no tool, again' row, a third no-tool run measured against it as every tool is, is the "
        "noise floor, and 'fork only' (a fork after every cell, the "
        "child exiting at once) what any tool that forks the kernel per cell pays. Added time = sum of cell "
        "times minus the reference's, as % of the reference run (> for a run that timed out: a lower bound). "
        "Beyond noise = per round, the tool's added time minus the noise run's (the same reference, whose "
        "per-cell minimum puts any third run above it by chance), median (the higher of an even count) and "
        "range over the rounds. Drain = "
        "`jupyter_ckpt.wait()` after the last cell (not in added time). Cold restore = the tool's restore in a "
        "new kernel, until the prompt is back (jupyter-ckpt maps large arrays and verifies them afterwards); "
        "full restore = jupyter-ckpt with `lazy_restore` off, every byte read and verified first; read = reading "
        "that checkpoint's files one after the other (how many bytes), from a warm page cache like the restores. "
        "Hooks (fork) = the tool's post-cell hooks per cell, and the kernel's time in `os.fork` within them; "
        "both are part of the pause, the rest of which is the reply. Gap = the most seconds of execution between "
        "two cells whose end state was checkpointed (jupyter-ckpt; the others checkpoint every cell). "
        "Peak = the most memory (PSS) the kernel and its writers held together, sampled every 0.2 s; the no-tool "
        "row gives the median of its runs. "
        "Undo, restores and matches are measured on the cell-by-cell runs. "
        "Matched: run / undo / cold restore / full restore, "
        "variable digests against the baseline run "
        "(~ differs, - missing, + extra). See README.md.",
        "",
        "| notebook | pattern | tool | pause p50 ms | pause p95 ms | hooks (fork) p50/p95 ms | added time "
        "| beyond noise | drain s "
        "| checkpoints | gap s | peak | bytes stored | undo s | cold restore s | full restore s | read s "
        "| matched (run / undo / restore / full) |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    ratios, where = [], []
    for nb, pattern, rounds in [(nb, p, e) for nb, by in report["notebooks"].items() for p, e in by.items()]:
        runs = [r for e in rounds for r in (e["baseline"], e.get("baseline_2", {})) if "cell_s" in r]
        seconds = [sum(r["cell_s"]) for r in runs if "failed" not in r]
        totals = " and ".join(f"{t:.1f} s" for t in seconds)
        if len(seconds) > 2:
            totals = f"{len(seconds)}, {min(seconds):.1f}–{max(seconds):.1f} s"
        peaks = [r["peak_bytes"] for r in runs if r.get("peak_bytes")]
        peak = human_bytes(int(statistics.median(peaks))) if peaks else ""
        lines.append(f"| {nb} | {pattern} | no tool | | | | runs of {totals} | | | | | {peak} | | | | | | |")
        names = dict.fromkeys(name for e in rounds for name in e["tools"])
        tools = {name: median_run([e["tools"][name] for e in rounds if name in e["tools"]]) for name in names}
        for name, (r, spread) in tools.items():
            s = r["summary"]
            failed = r.get("failed", "")
            added = (">" if s["lower_bound"] else "") + cell(s["added_pct"], "{:.1f}%") + spread
            added += f" ({failed})" if failed else ""
            kinds = ("run", "undo", "restore", "full_restore")
            matched = " / ".join(matches(r.get(f"{k}_diffs")) for k in kinds)
            undo, restore, full = (r.get(f"{k}_failed") or cell(r.get(f"{k}_s"), "{:.2f}") for k in kinds[1:])
            if "waited_s" in s:
                where.append(
                    f"| {nb} | {pattern} | {name} | {s['added_s']:.2f} | {s['added_user_s']:.2f} "
                    f"| {s['added_system_s']:.2f} | {s['waited_s']:.2f} | {s['added_faults']:+,.0f} |"
                )
            forks = f"{s['hooks_p50_ms']:.0f}/{s['hooks_p95_ms']:.0f}" if "hooks_p50_ms" in s else "–"
            if "fork_p50_ms" in s:
                forks += f" ({s['fork_p50_ms']:.0f}/{s['fork_p95_ms']:.0f})"
            lines.append(
                f"| {nb} | {pattern} | {name} | {cell(s.get('pause_p50_ms'))} | {cell(s.get('pause_p95_ms'))} "
                f"| {forks} | {added} | {beyond_noise(rounds, name)} | {cell(r.get('drain_s'), '{:.2f}')} "
                f"| {r.get('checkpoints', '–')} "
                f"| {cell(r.get('gap_s'), '{:.1f}')} | {human_bytes(r['peak_bytes']) if r.get('peak_bytes') else '–'} "
                f"| {human_bytes(r['bytes'])} "
                f"| {undo} | {restore} | {full} | {read_cell(r)} | {matched} |"
            )
        for peer in ("dill", "kishu"):
            if "jupyter-ckpt" not in tools or peer not in tools:
                continue
            ours, theirs = tools["jupyter-ckpt"][0], tools[peer][0]
            a, b = theirs["summary"], ours["summary"]
            ratios.append(
                f"| {nb} | {pattern} | {peer} | {ratio(a.get('pause_p95_ms'), b.get('pause_p95_ms'))} "
                f"| {'>' if a['lower_bound'] else ''}{ratio(a['added_s'], b['added_s'])} "
                f"| {'≥' if 'failed' in theirs else ''}{ratio(theirs['bytes'], ours['bytes'])} "
                f"| {ratio(theirs.get('undo_s'), ours.get('undo_s'))} "
                f"| {ratio(theirs.get('restore_s'), ours.get('restore_s'))} |"
                + (" peer run incomplete |" if "failed" in theirs else " |")
            )
    if where:
        lines += [
            "",
            "Where the added time goes (the run of median added time, against the reference's CPU): the cells' "
            "own extra user and system CPU seconds in the kernel (a copy on write is system time and a fault), "
            "and the rest, the time the cells' thread waited to run:",
            "",
            "| notebook | pattern | tool | added s | user s | system s | waited s | minor faults |",
            "|---|---|---|--:|--:|--:|--:|--:|",
            *where,
        ]
    if "throughput" in report:
        size = next(iter(report["throughput"].values()))[0]["bytes"]
        lines += [
            "",
            "Throughput on array data (benchmarks/throughput.py): four arrays, "
            f"{human_bytes(size)} in all, taken to durable files on the same disk by pickle 5 "
            "with out-of-band buffers (one file, one fsync) and by a jupyter-ckpt checkpoint (chunks hashed, "
            "signed, compressed where it pays, each fsynced); arrays' bytes ÷ median wall time of "
            f"{report['throughput_repeat']} alternating runs.",
            "",
            "| data | write | pickle 5 GB/s | jupyter-ckpt GB/s | jupyter-ckpt ÷ pickle 5 "
            "| bytes written (pickle 5 / ours) |",
            "|---|---|--:|--:|--:|---|",
        ]
        for data, rows in report["throughput"].items():
            for row in rows:
                rate = row["gb_per_s"]
                written = " / ".join(human_bytes(row["written"][k]) for k in ("pickle5", "jupyter-ckpt"))
                lines.append(
                    f"| {data} | {row['case']} | {rate['pickle5']:.2f} | {rate['jupyter-ckpt']:.2f} "
                    f"| {row['ratio']:.2f}× | {written} |"
                )
    if ratios:
        lines += [
            "",
            "Peers relative to jupyter-ckpt (peer ÷ jupyter-ckpt; above 1× means jupyter-ckpt is better):",
            "",
            "| notebook | pattern | peer | pause p95 | added time | bytes stored | undo | cold restore | note |",
            "|---|---|---|--:|--:|--:|--:|--:|---|",
            *ratios,
        ]
    return "\n".join(lines) + "\n"


# -- main ---------------------------------------------------------------------------------------


def settle_memory() -> None:
    """Start every run from the same memory. The previous run's gigabytes reach the disk now, not during this
    run; then, where the benchmark may (root), the page cache they filled is dropped and free memory compacted,
    so that the next kernel's large allocations neither reclaim cache nor wait for the huge pages numpy asks
    for. Without it, a run after one that wrote gigabytes is slower whatever it runs."""
    os.sync()
    for knob in ("/proc/sys/vm/drop_caches", "/proc/sys/vm/compact_memory"):
        with contextlib.suppress(OSError):
            Path(knob).write_text("1")


PAGE_REPORTING = Path("/sys/module/page_reporting/parameters/page_reporting_order")
# Fill all but 1 GiB of the available memory, 256 MiB at a time, then exit (which frees it).
TOUCH_FREE_MEMORY = """
import re
available = int(re.search(r"MemAvailable:\\s+(\\d+)", open("/proc/meminfo").read()).group(1)) * 1024
held = [bytearray(256 << 20) for _ in range((available - (1 << 30)) // (256 << 20))]
"""


@contextlib.contextmanager
def host_backed_memory(wanted: bool = True) -> Iterator[str]:
    """Give every run memory that costs the same to touch (unless not ``wanted``); yields what was done, for
    the report.

    A virtual machine with free page reporting (virtio-balloon) hands its free memory back to the host
    seconds after it is freed, and the next touch of each such page is a host fault: on the machine this was
    written on, filling 2 GiB took 0.36 s from memory freed a moment before and 3-5 s after a 3 s pause, so
    the same large-allocation cell varied by seconds between two no-tool runs. Where the benchmark may
    (root, a kernel with the knob), reporting is turned off for the run, every free page is touched once
    so the host backs it, and the setting is put back at the end.
    """
    if not wanted:
        yield "as found (--memory-as-found)"
        return
    try:
        was = PAGE_REPORTING.read_text().strip()
        PAGE_REPORTING.write_text("11")  # above the buddy allocator's largest order: nothing is reported
    except OSError:
        yield "as found (free page reporting not adjustable here)"
        return
    try:
        print("touching free memory once, so the host backs it ...", end=" ", flush=True)
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", TOUCH_FREE_MEMORY], check=True)
        print(f"{time.monotonic() - t0:.0f} s", flush=True)
        yield f"free page reporting off during the run (was order {was}), free memory touched first"
    finally:
        PAGE_REPORTING.write_text(was)


def run_mode(
    mode_class: type[Mode],
    nb: str,
    cells: list[str],
    pattern: str,
    entry: dict[str, Any],
    env: dict[str, str],
    cap: float,
    min_cap: float,
) -> dict[str, Any]:
    """One run of one notebook under one mode and pattern, in a directory of its own."""
    settle_memory()
    tmp = Path(tempfile.mkdtemp(prefix=f"{nb}-{mode_class.name}-", dir=WORK))
    copy = tmp / f"{nb}.ipynb"
    shutil.copy(NOTEBOOKS / f"{nb}.ipynb", copy)
    kernel_env = {**env, "IPYTHONDIR": str(tmp / "ipython"), "JUPYTER_DATA_DIR": str(tmp / "data")}
    log = WORK / "logs" / f"{nb}-{pattern.replace(' ', '-')}-{mode_class.name}.log"
    log.write_bytes(b"")
    print(f"{nb}, {pattern}: {mode_class.name} ...", end=" ", flush=True)
    t0 = time.monotonic()
    limit = BASELINE_CAP if mode_class is Mode else max(min_cap, cap * sum(entry["baseline"]["cell_s"]))
    try:
        result = run_session(mode_class(tmp, copy), cells, pattern, kernel_env, limit, entry.get("baseline"), log)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{time.monotonic() - t0:.0f} s {result.get('failed', '')}", flush=True)
    return result


def run_round(
    modes: list[type[Mode]],
    nb: str,
    cells: list[str],
    pattern: str,
    env: dict[str, str],
    cap: float,
    min_cap: float,
    peers: bool,
    turn: int,
) -> dict[str, Any]:
    """One notebook in one pattern under every mode (dill and Kishu if ``peers``), one after the other; each
    tool summarized against the reference of this round.

    The first no-tool run comes first (it sets the tools' time cap and the variables they must match). The
    others, the second no-tool run among them, take turns: round ``turn`` starts at the ``turn``-th, so that
    across rounds no mode always runs at the same place, right after the same other mode.
    """
    entry: dict[str, Any] = {"tools": {}, "baseline": run_mode(Mode, nb, cells, pattern, {}, env, cap, min_cap)}
    if "failed" in entry["baseline"]:
        return entry
    # A second no-tool run: the reference is, per cell, the faster of the two. 'no tool, again' is a third,
    # compared with that reference as every tool is: its added time is the noise that a tool's row carries
    # too (a run inside the minimum would be flattered by it).
    rest = [m for m in modes if peers or m not in (Dill, Kishu)]
    k = turn % len(rest)
    for mode_class in rest[k:] + rest[:k]:
        result = run_mode(mode_class, nb, cells, pattern, entry, env, cap, min_cap)
        if mode_class is Mode:
            entry["baseline_2"] = result
        else:
            entry["tools"][mode_class.name] = result
    reference = fastest(entry["baseline"], entry["baseline_2"])
    for result in entry["tools"].values():
        result["summary"] = summarize(result, reference)
    return entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    quick = os.environ.get("BENCH_QUICK", "") not in ("", "0")
    parser.add_argument("--quick", action="store_true", default=quick, help="smoke run: scale 0.02, cap at least 10 s")
    parser.add_argument("--scale", type=float, help="data sizes, 1 = full (default: $BENCH_SCALE or 1)")
    parser.add_argument(
        "--cap", type=float, default=8.0, help="a tool's run may take this many times the baseline run, at least 60 s"
    )
    parser.add_argument("--notebooks", help="comma-separated subset, e.g. ml,smallobjs")
    parser.add_argument("--tools", help="comma-separated subset of 'fork only',jupyter-ckpt,dill,kishu")
    parser.add_argument("--patterns", help=f"comma-separated subset of {', '.join(PATTERNS)} (default: all)")
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds of every run; a row shows the round of median added time"
    )
    parser.add_argument(
        "--memory-as-found",
        action="store_true",
        help="leave the VM's free page reporting as it is (runs then vary by seconds on memory-heavy cells)",
    )
    parser.add_argument(
        "--peers-everywhere", action="store_true", help="run dill and Kishu in every pattern, not only cell by cell"
    )
    args = parser.parse_args()
    patterns = args.patterns.split(",") if args.patterns else list(PATTERNS)
    if set(patterns) - set(PATTERNS):
        parser.error(f"--patterns takes {', '.join(PATTERNS)}")
    scale = args.scale or float(os.environ.get("BENCH_SCALE") or (0.02 if args.quick else 1))
    min_cap = 10.0 if args.quick else 60.0
    names = args.notebooks.split(",") if args.notebooks else sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
    modes = [m for m in MODES if m in (Mode, Again) or not args.tools or m.name in args.tools.split(",")]
    if Kishu in modes:
        ensure_kishu_venv()

    notebooks = {name: notebook_cells(NOTEBOOKS / f"{name}.ipynb") for name in names}
    env = {**os.environ, "BENCH_SCALE": str(scale), "PYTHONPATH": str(BENCH), "PYTHONHASHSEED": "0"}
    git = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, cwd=BENCH)
    report: dict[str, Any] = {
        "meta": {
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
            "scale": scale,
            "cap": args.cap,
            "min_cap_s": min_cap,
            "repeat": args.repeat,
            "git": git.stdout.strip(),
            "versions": {p: version(p) for p in ("jupyter-ckpt", *SHARED_PACKAGES)},
        },
        "notebooks": {},
    }
    began = time.monotonic()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (WORK / "logs").mkdir(parents=True, exist_ok=True)
    # Stopped (kill, a CI timeout): exit through the clean-ups, which put the VM's page reporting back.
    signal.signal(signal.SIGTERM, lambda signum, _: sys.exit(128 + signum))
    with host_backed_memory(not args.memory_as_found) as memory:
        report["meta"]["memory"] = memory
        warm_up(modes, notebooks, {**env, "BENCH_SCALE": "0"})
        for n in range(args.repeat):  # a round of every notebook and pattern, so that each point's rounds spread out
            for nb, cells in notebooks.items():
                for pattern in patterns:
                    # The peers take minutes a cell: they run once, cell by cell unless asked for everywhere.
                    peers = n == 0 and (pattern == "cell by cell" or args.peers_everywhere)
                    entry = run_round(modes, nb, cells, pattern, env, args.cap, min_cap, peers, n)
                    report["notebooks"].setdefault(nb, {}).setdefault(pattern, []).append(entry)
            save(report, stamp)  # a run stopped or failed later keeps its finished rounds
        print("throughput ...", end=" ", flush=True)
        t0 = time.monotonic()
        options = ["--memory-as-found", "--scale", str(scale), "--repeat", str(THROUGHPUT_REPEAT)]
        measured = subprocess.run(
            [sys.executable, str(BENCH / "throughput.py"), *options],
            capture_output=True,
            text=True,
            check=True,
        )
        report.update(throughput=json.loads(measured.stdout), throughput_repeat=THROUGHPUT_REPEAT)
        print(f"{time.monotonic() - t0:.0f} s", flush=True)
    report["meta"]["wall_s"] = time.monotonic() - began
    save(report, stamp)
    table = markdown(report)
    (RESULTS / "latest.md").write_text(table)
    print(table)
    print(f"wrote {RESULTS / f'{stamp}.json'} and {RESULTS / 'latest.md'}")


def save(report: dict[str, Any], stamp: str) -> None:
    """Write the report so far to ``results/<stamp>.json``, without the digests (only the comparisons need them)."""
    for by_pattern in report["notebooks"].values():
        entries = [entry for rounds in by_pattern.values() for entry in rounds]
        for r in [r for e in entries for r in (e["baseline"], e.get("baseline_2", {}), *e["tools"].values())]:
            r.pop("digest", None)
            r.pop("digest_before_last", None)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stamp}.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

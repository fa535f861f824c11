"""Where checkpoints are written: in a forked child while the user works, or inline.

``ForkWriter`` forks the kernel. The child sees a frozen copy of the namespace
(copy-on-write: the fork costs page tables, not data), serializes it, writes the
blobs and leaves the manifest in a result file; the parent commits the catalog
row when it next looks (a cell boundary, an idle tick, ``wait()``). The child
never touches a stream, a logger, a socket or the catalog, and always ends in
``os._exit``. The parent reaps exactly its own children's pids.

Up to two children write at once, each with its own cell's snapshot; beyond
that, requests coalesce: the writer says it is busy and the caller checkpoints
later, when the state is newer anyway.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Job = Callable[[], Any]
Done = Callable[[Any, BaseException | None], None]


class WriterFailed(Exception):
    """The background write failed; the message is the child's."""


class SyncWriter:
    """Runs each write at once, in the caller's thread."""

    busy = False

    def submit(self, job: Job, done: Done) -> bool:
        try:
            outcome = job()
        except Exception as e:
            done(None, e)
        else:
            done(outcome, None)
        return True

    def poll(self, block: bool = False) -> None:
        """Nothing is ever in flight."""


@dataclass
class _Child:
    pid: int
    result: Path
    done: Done


def fork_unsafe_reason(min_free_ratio: float = 0.5) -> str | None:
    """Why forking this process now would be unsafe, or None."""
    if not hasattr(os, "fork"):
        return "this platform cannot fork"
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "cuda", None) is not None and torch.cuda.is_initialized():
        return "a CUDA context is live (a forked child cannot use it)"
    try:
        meminfo = Path("/proc/meminfo").read_text()
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    available = _kib(meminfo, "MemAvailable:")
    rss = _kib(status, "VmRSS:")
    if available is not None and rss is not None and available < min_free_ratio * rss:
        return f"only {available >> 10} MiB of memory free for a child of a {rss >> 10} MiB kernel"
    return None


def _kib(text: str, field: str) -> int | None:
    for line in text.splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return None


class ForkWriter:
    """Up to ``max_children`` forked children at a time, collected in the order they were started.

    Each child snapshots the namespace at its own cell boundary, so every cell gets
    its own checkpoint even when the previous one is still being written. Results
    are JSON handed back through a file and passed to ``done`` oldest first, so
    checkpoints are committed in the order they were taken.
    """

    def __init__(
        self, tmp_dir: Path, encode: Callable[[Any], Any], decode: Callable[[Any], Any], max_children: int = 2
    ) -> None:
        self._tmp = tmp_dir
        self._encode = encode
        self._decode = decode
        self._max = max_children
        self._children: list[_Child] = []
        self._started = 0

    @property
    def busy(self) -> bool:
        self.poll()
        return bool(self._children)

    def submit(self, job: Job, done: Done) -> bool:
        """Start ``job`` in a child; False if ``max_children`` are running (the request coalesces)."""
        self.poll()
        if len(self._children) >= self._max:
            return False
        self._started += 1
        result = self._tmp / f"result.{os.getpid()}.{self._started}.json"
        pid = os.fork()
        if pid == 0:  # the child: no streams, no logging, no sockets, and never return
            code = 1
            try:
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt is for the user's cell
                gc.disable()  # a collection would touch (and so copy) every tracked object's page
                payload = {"ok": self._encode(job())}
                code = 0
            except BaseException as e:
                payload = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc(limit=5)}
            finally:
                try:
                    tmp = result.with_suffix(".part")
                    tmp.write_text(json.dumps(payload))
                    tmp.replace(result)
                finally:
                    os._exit(code)
        self._children.append(_Child(pid, result, done))
        return True

    def poll(self, block: bool = False) -> None:
        """Collect finished children, oldest first (or wait for all), handing each outcome to its ``done``."""
        while self._children:
            child = self._children[0]
            try:
                pid, _ = os.waitpid(child.pid, 0 if block else os.WNOHANG)
            except ChildProcessError:  # someone else reaped it: the result file is the truth
                pid = child.pid
            if pid == 0:
                return  # the oldest is still writing; younger ones wait their turn
            self._children.pop(0)
            self._collect(child)

    def _collect(self, child: _Child) -> None:
        try:
            payload = json.loads(child.result.read_text())
        except (OSError, ValueError):
            child.done(None, WriterFailed("the background writer died before finishing"))
            return
        finally:
            child.result.unlink(missing_ok=True)
        if "error" in payload:
            child.done(None, WriterFailed(payload["error"]))
        else:
            child.done(self._decode(payload["ok"]), None)

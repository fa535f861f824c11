"""Where checkpoints are written: in a forked child while the user works, or inline.

``ForkWriter`` forks the kernel. The child sees a frozen copy of the namespace
(copy-on-write: the fork costs page tables, not data), serializes it, writes the
blobs and leaves the manifest in a result file; the parent commits the catalog
row when it next looks (an idle tick, also mid-cell, or ``wait()``). The child
never touches a stream, a logger, a socket or the catalog, and always ends in
``os._exit``. The parent reaps exactly its own children's pids.

Every request forks at once, so each cell's state is taken at its own
boundary; at most two children write at a time and the others wait for a
go-ahead on a pipe (or its end, when the kernel is gone). When four are alive,
a new request drops the oldest child that has not started: the newest states are
the ones an undo needs. A dropped child is killed and reaped later, so the cell
does not wait for its exit. A request only reaps: finished children are committed
by ``poll``, which the kernel's idle thread calls, so a cell boundary commits nothing.
Children run as idle-class tasks (``SCHED_IDLE``, or nice 19 where that class is
missing): they get a core only when nothing else wants it, so the user's cells, the
kernel's threads and the frontend come first.

While any child is alive, the kernel's automatic full garbage collections wait: a full
collection writes to the header of every tracked object, which would copy nearly every page
of the heap shared with the child. Young generations are collected as usual, and so is
everything on an explicit ``gc.collect()``.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import resource
import select
import signal
import struct
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .progress import Progress

# A write: told where to report its progress (bytes done, in all), or None when nobody waits for it.
Job = Callable[[Progress | None], Any]
Done = Callable[[Any, BaseException | None], None]
# A threshold for the oldest generation that is never reached.
_NEVER = 2**31 - 1


class WriterFailed(Exception):
    """The background write failed; the message is the child's."""


class SyncWriter:
    """Runs each write at once, in the caller's thread."""

    busy = False

    def submit(self, job: Job, done: Done, progress: Progress | None = None) -> None:
        try:
            outcome = job(progress)
        except Exception as e:
            done(None, e)
        else:
            done(outcome, None)

    def poll(self, block: bool = False) -> None:
        """Nothing is ever in flight."""


@dataclass
class _Child:
    pid: int
    result: Path
    done: Done
    gate: int | None  # the pipe on which the child waits for its go-ahead; None once it may write
    report: tuple[int, Progress] | None = None  # the pipe on which it tells its progress, and whom to tell
    exited: bool = False  # reaped; its result waits to be collected


def fork_unsafe_reason(min_free_ratio: float = 0.5) -> str | None:
    """Why forking this process now would be unsafe, or None."""
    if not hasattr(os, "fork"):
        return "this platform cannot fork"
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "cuda", None) is not None and torch.cuda.is_initialized():
        return "a CUDA context is live (a forked child cannot use it)"
    shared = shared_writable_mapping()
    if shared is not None:
        return f"{shared} is mapped shared and writable, so a forked child would not see a frozen copy of it"
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


def shared_writable_mapping() -> str | None:
    """A memory mapping of this process that is shared and writable, and may hold a variable's data, or None.

    A fork copies private memory on write, which is what makes the child's view a
    snapshot; a shared mapping (``numpy.memmap`` in ``r+`` mode, ``mmap``,
    ``multiprocessing.shared_memory``) is not copied, so a child would read what
    the cells after its snapshot write there. SQLite's WAL index (``-shm``) and
    POSIX semaphores are shared too, and never hold a Python buffer.
    """
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 2 or fields[1][1] != "w" or fields[1][3] != "s":
            continue
        path = fields[5].strip() if len(fields) > 5 else "anonymous shared memory"
        if not (path.endswith("-shm") or path.startswith("/dev/shm/sem.")):
            return path
    return None


def _run_when_idle() -> None:
    """Let this process (and the threads it starts) run only on a core nothing else wants."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):  # not Linux
        os.nice(19)


def _reaped(pid: int, block: bool = False) -> float | None:
    """The CPU seconds our child ``pid`` used if it has exited (reaping it), else None; ``block`` waits."""
    try:
        done, _, usage = os.wait4(pid, 0 if block else os.WNOHANG)
    except ChildProcessError:  # someone else reaped it: the result file is the truth
        return 0.0
    return usage.ru_utime + usage.ru_stime if done else None


def _cpu_so_far(pid: int) -> float:
    """The CPU seconds a running process has used (/proc), 0 where unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def resident_bytes() -> int:
    """This process's resident memory (/proc), 0 where unknown."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def system_seconds() -> float:
    """CPU time this process has spent in the OS kernel, all its threads.

    A copy-on-write copy is done by the OS kernel for the process that writes
    the page, so it is counted here, the 2 MiB copies of huge pages too. Faults
    alone undercount it: copying a written 400 MB array cost the kernel 0.96 s
    of system time here, for 97,705 faults.
    """
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


def _kib(text: str, field: str) -> int | None:
    for line in text.splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return None


_REPORT = struct.Struct("qq")  # (done, total): smaller than PIPE_BUF, so written and read whole


def _teller(fd: int) -> Progress:
    """A child's progress, written to the pipe its parent reads; dropped when the parent falls behind."""
    os.set_blocking(fd, False)

    def tell(done: int, total: int) -> None:
        with contextlib.suppress(BlockingIOError):
            os.write(fd, _REPORT.pack(done, total))

    return tell


def _follow(child: _Child) -> None:
    """Pass a child's progress reports on as they come, until it exits.

    The pipe's end is not enough to stop on: a process the child forked may hold it open.
    """
    if child.report is None:
        return
    fd, progress = child.report
    while True:
        if select.select([fd], [], [], 0.25)[0]:
            data = os.read(fd, 256 * _REPORT.size)
            if not data:
                return
            progress(*_REPORT.unpack(data[-_REPORT.size :]))  # the newest report is the one that counts
        elif _exited(child.pid):
            return


def _exited(pid: int) -> bool:
    """Whether a child has exited, leaving it to be reaped."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


class ForkWriter:
    """Forked children, at most ``writing`` of them writing at once, collected in the order they were started.

    Each child snapshots the namespace at its own cell boundary, so every cell gets
    its own checkpoint even when earlier ones are still being written. Results are
    JSON handed back through a file and passed to ``done`` oldest first, so
    checkpoints are committed in the order they were taken.
    """

    def __init__(
        self,
        tmp_dir: Path,
        encode: Callable[[Any], Any],
        decode: Callable[[Any], Any],
        writing: int = 2,
        alive: int = 4,
    ) -> None:
        if not 0 < writing < alive:
            raise ValueError("a writer needs room for a child that waits")
        self._tmp = tmp_dir
        self._encode = encode
        self._decode = decode
        self._writing = writing
        self._alive = alive
        self._children: list[_Child] = []
        self._dropped: list[int] = []  # killed children not yet reaped
        self._started = 0
        self._full_threshold: int | None = None  # the oldest generation's threshold, while it is held back
        self._reaped_cpu = 0.0  # CPU seconds of the children reaped so far

    @property
    def busy(self) -> bool:
        self.poll()
        return bool(self._children)

    def cpu_seconds(self) -> float:
        """CPU time used by every child so far, those still running too: on a machine with few cores,
        what a writer takes from the cells."""
        self._reap()
        return self._reaped_cpu + sum(_cpu_so_far(c.pid) for c in self._children if not c.exited)

    def _reap_one(self, pid: int, block: bool = False) -> bool:
        cpu = _reaped(pid, block)
        self._reaped_cpu += cpu or 0.0
        return cpu is not None

    def submit(self, job: Job, done: Done, progress: Progress | None = None) -> None:
        """Fork a child holding this moment's state; with ``alive`` children, the oldest waiting one gives way.

        Finished children are reaped but not collected here: committing them is ``poll``'s work.
        A child given ``progress`` tells it, through a pipe, while ``poll(block=True)`` waits for it.
        """
        self._reap()
        living = [c for c in self._children if not c.exited]
        if len(living) >= self._alive:  # fewer than ``alive`` may write, so one of them waits
            self._drop(next(c for c in living if c.gate is not None))
        self._started += 1
        result = self._tmp / f"result.{os.getpid()}.{self._started}.json"
        wait_on, gate = os.pipe()
        listen, tell = os.pipe() if progress is not None else (-1, -1)
        self._hold_full_collections()
        pid = os.fork()
        if pid == 0:  # the child: no streams, no logging, no sockets, and never return
            code = 1
            try:
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt is for the user's cell
                _run_when_idle()
                gc.disable()  # a collection would touch (and so copy) every tracked object's page
                for other in [gate, listen] + [c.gate for c in self._children if c.gate is not None]:
                    if other >= 0:
                        os.close(other)  # so that the kernel's death ends this child's wait
                os.read(wait_on, 1)
                payload = {"ok": self._encode(job(None if tell < 0 else _teller(tell)))}
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
        os.close(wait_on)
        if progress is not None:
            os.close(tell)  # the child's exit then closes the last writer: the end of its reports
        self._children.append(_Child(pid, result, done, gate, None if progress is None else (listen, progress)))
        self._release()

    def _release(self) -> None:
        """Let the oldest waiting children write, up to ``writing`` at once."""
        writing = sum(c.gate is None and not c.exited for c in self._children)
        for child in self._children:
            if writing >= self._writing:
                return
            if child.gate is not None:
                with contextlib.suppress(OSError):  # a child that died waiting is collected as failed
                    os.write(child.gate, b"1")
                os.close(child.gate)
                child.gate = None
                writing += not child.exited

    def _drop(self, child: _Child) -> None:
        """End a child that has not started writing: a newer state replaces it. It is reaped later."""
        os.kill(child.pid, signal.SIGKILL)
        for fd in (child.gate, child.report and child.report[0]):
            if fd is not None:
                os.close(fd)
        self._children.remove(child)
        self._dropped.append(child.pid)

    def _reap(self) -> None:
        """Note which children have exited (and free their turn to write) without collecting them."""
        self._dropped = [pid for pid in self._dropped if not self._reap_one(pid)]
        for child in self._children:
            child.exited = child.exited or self._reap_one(child.pid)
        self._release()
        if all(c.exited for c in self._children):
            self._resume_full_collections()

    def poll(self, block: bool = False) -> None:
        """Collect finished children, oldest first (or wait for all), handing each outcome to its ``done``."""
        self._reap()
        while self._children:
            child = self._children[0]
            if not child.exited:
                if not block:
                    return  # the oldest is still writing; younger ones wait their turn
                _follow(child)
                child.exited = self._reap_one(child.pid, block=True)
                self._reap()
            self._children.pop(0)
            self._collect(child)

    def _hold_full_collections(self) -> None:
        """Keep automatic full collections from copying the heap a child shares."""
        if self._full_threshold is None:
            young, middle, self._full_threshold = gc.get_threshold()
            gc.set_threshold(young, middle, _NEVER)

    def _resume_full_collections(self) -> None:
        """No child shares the heap any more: give the oldest generation its threshold back."""
        if self._full_threshold is not None:
            young, middle, oldest = gc.get_threshold()
            if oldest == _NEVER:  # unless someone set a threshold of their own meanwhile
                gc.set_threshold(young, middle, self._full_threshold)
            self._full_threshold = None

    def _collect(self, child: _Child) -> None:
        if child.report is not None:
            os.close(child.report[0])
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

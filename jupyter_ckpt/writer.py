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

Each page the kernel writes while a child shares it is copied, so a cell that rewrites its
data in place beside a child can need as much memory again. Two things keep that from
ending in an out-of-memory kill. A child makes itself the out-of-memory killer's first
victim (``oom_score_adj`` 1000): killing it frees exactly the originals of the pages the
kernel copied. And while any child is alive, a watcher thread in the kernel reads the
headroom (``memory.py``) every ``WATCH_EVERY`` seconds and kills every child when it falls
below a reserve. The watcher also kills a writing child that has slept ``STALL`` seconds
without using any CPU: it waits on something the fork did not copy (a lock another thread
held, a thread pool), and would wait forever. A child stopped any of these ways is reported to its ``done`` as
``WriterStopped``. Reaping and the watcher's kills hold one lock, so a pid is never
signalled after it was reaped, when it may be another process's.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import gc
import json
import os
import resource
import secrets
import select
import signal
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable, Collection
from dataclasses import dataclass
from errno import EINVAL, ENOENT, ENOTTY
from pathlib import Path
from typing import Any

from . import capture, memory
from .blobs import BlobInfo
from .errors import CheckpointError, IntegrityError, UnknownSession
from .permissions import read_own_file
from .processes import Process, owner, owner_alive, started
from .progress import Progress
from .session import kernel_head
from .store import RESULT_MAX, Store

# A write: told where to report its progress (bytes done, in all), or None when nobody waits for it.
Job = Callable[[Progress | None], Any]
Done = Callable[[Any, BaseException | None], None]
# A threshold for the oldest generation that is never reached.
_NEVER = 2**31 - 1
# Seconds between the watcher's readings of the headroom: a cell copies at most a few hundred MiB meanwhile.
WATCH_EVERY = 0.02
# A writing child that sleeps this long without using any CPU waits on something the fork did not copy (a lock
# another thread of the kernel held, a thread team): it would wait forever, and every wait for it with it.
STALL = 30.0
# The exit code of a writer that found no room on the disk for its result, and of one that found it read-only.
_NO_ROOM = 75
_READ_ONLY = 74
_EXIT_FOR = {errno.ENOSPC: _NO_ROOM, errno.EDQUOT: _NO_ROOM, errno.EROFS: _READ_ONLY}  # by the error of the result
# Seconds the watcher waits for the next child once none is alive: back-to-back cells find it running.
WATCHER_LINGERS = 10.0


class WriterFailed(Exception):
    """The background write failed; the message is the child's."""


class WriterStopped(WriterFailed):
    """The child was killed to free memory, by the watcher or (most likely) the out-of-memory killer.

    Its state can still be written by a path that needs no fork: the message
    says, in the user's words, why it was stopped.
    """


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
    status: int | None = None  # its wait status, once reaped; its result then waits to be collected
    stopped: str | None = None  # why the watcher killed it
    cpu: int = -1  # its CPU time (clock ticks) when the watcher last saw it change, and when that was
    since: float = 0.0

    @property
    def exited(self) -> bool:
        return self.status is not None


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
    room, rss = memory.headroom(), resident_bytes()
    if room is not None and room.free < min_free_ratio * rss:
        return f"only {room} for a child of a {rss >> 20} MiB kernel"
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
        names = _shared_writable_names()
    except OSError:
        return None
    for path in names:
        name = path.removesuffix(" (deleted)")  # a catalog deleted while open is still mapped
        if not (name.endswith("-shm") or name.startswith("/dev/shm/sem.")):
            return path
    return None


class _MapQuery(ctypes.Structure):
    """Linux's ``struct procmap_query``."""

    _fields_ = [
        *((name, ctypes.c_uint64) for name in ("size", "flags", "addr", "start", "end", "vma_flags", "page_size")),
        *((name, ctypes.c_uint64) for name in ("offset", "inode")),
        *((name, ctypes.c_uint32) for name in ("dev_major", "dev_minor", "name_size", "build_id_size")),
        *((name, ctypes.c_uint64) for name in ("name_addr", "build_id_addr")),
    ]


_PROCMAP_QUERY = (3 << 30) | (ctypes.sizeof(_MapQuery) << 16) | (ord("f") << 8) | 17
_COVERING_OR_NEXT, _WRITABLE, _SHARED = 0x10, 0x02, 0x08
_ANONYMOUS_SHARED = "anonymous shared memory"


def _shared_writable_names() -> list[str]:
    """The names of this process's shared writable mappings, read again at every fork (any cell may have
    mapped a file): asked of the kernel where it can say, else listed."""
    queried = _queried_shared_writable()
    return _listed_shared_writable() if queried is None else queried


def _queried_shared_writable() -> list[str] | None:
    """The names the kernel gives, one mapping at a time (``PROCMAP_QUERY``, Linux 6.11: 0.1 ms with pandas and
    scikit-learn imported); None before 6.11."""
    name = ctypes.create_string_buffer(4096)
    names: list[str] = []
    maps = os.open("/proc/self/maps", os.O_RDONLY | os.O_CLOEXEC)
    try:
        flags = _COVERING_OR_NEXT | _WRITABLE | _SHARED
        query = _MapQuery(size=ctypes.sizeof(_MapQuery), flags=flags, addr=0, name_addr=ctypes.addressof(name))
        while True:
            query.name_size = len(name)  # in: the room there is; out: the name's length with its NUL
            try:
                memory.ioctl(maps, _PROCMAP_QUERY, query)
            except OSError as e:
                if e.errno == ENOENT:  # no such mapping above the address
                    return names
                if e.errno in (ENOTTY, EINVAL):
                    return None
                raise
            names.append(name.value.decode(errors="replace") if query.name_size else _ANONYMOUS_SHARED)
            query.addr = query.end
    finally:
        os.close(maps)


def _listed_shared_writable() -> list[str]:
    """The names ``/proc/self/maps`` lists, a line per mapping (3 ms with pandas and scikit-learn imported)."""
    return [name or _ANONYMOUS_SHARED for _, _, mode, name in memory.mappings() if mode[1] == "w" and mode[3] == "s"]


def _run_when_idle() -> None:
    """Let this process (and the threads it starts) run only on a core nothing else wants."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):  # not Linux
        os.nice(19)


def _one_thread_for_torch() -> None:
    """In a forked child, keep torch's operations (a tensor's repr, dequantizing one to save it) in this thread.

    The OpenMP thread team torch started in the kernel does not survive a fork: the child's first parallel
    region waits forever for threads it does not have. One thread runs no region.
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _reaped(pid: int) -> tuple[int, float] | None:
    """Reap our child ``pid`` if it has exited: its wait status and the CPU seconds it used; None while it runs."""
    try:
        done, status, usage = os.wait4(pid, os.WNOHANG)
    except ChildProcessError:  # someone else reaped it: the result file is the truth
        return 0, 0.0
    return (status, usage.ru_utime + usage.ru_stime) if done else None


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

    The pipe's end is not enough to stop on: a process the child forked may hold it open. A child that
    has exited already (a quick write, done before anyone waited) has its last reports read at once.
    """
    if child.report is None:
        return
    fd, progress = child.report
    while True:
        exited = _exited(child.pid)
        if select.select([fd], [], [], 0 if exited else 0.25)[0]:
            data = os.read(fd, 256 * _REPORT.size)
            if not data:
                return
            progress(*_REPORT.unpack(data[-_REPORT.size :]))  # the newest report is the one that counts
        elif exited:
            return


def _exited(pid: int) -> bool:
    """Whether a child has exited, leaving it to be reaped."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _await_exit(pid: int) -> None:
    """Wait until a child has exited, leaving it to be reaped (which only ``_reap`` does, under the lock)."""
    with contextlib.suppress(ChildProcessError):
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)


def _stalled(child: _Child, now: float, stall: float) -> bool:
    """Whether a writing child has slept for ``stall`` seconds without using any CPU (from /proc)."""
    try:
        fields = Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:  # gone: reaped next
        return False
    state, cpu = fields[0], int(fields[11]) + int(fields[12])  # its main thread's state; all its threads' time
    if state != "S" or cpu != child.cpu:
        child.cpu, child.since = cpu, now
        return False
    return now - child.since >= stall


def _failure(child: _Child) -> WriterFailed:
    """What to tell of a child that left no result, from why the watcher stopped it or how it died."""
    if child.stopped is not None:
        return WriterStopped(child.stopped)
    if child.status is not None and os.WIFSIGNALED(child.status) and os.WTERMSIG(child.status) == signal.SIGKILL:
        return WriterStopped("a checkpoint writer was killed (signal 9), most likely by the out-of-memory killer")
    code = os.WEXITSTATUS(child.status) if child.status is not None and os.WIFEXITED(child.status) else None
    if code == _NO_ROOM:
        return WriterFailed(
            f"StoreFullError: the disk under {child.result.parent} is full: the checkpoint's writer could not even "
            "leave its result"
        )
    if code == _READ_ONLY:
        return WriterFailed(f"cannot write to the checkpoint store's {child.result.parent}: {os.strerror(errno.EROFS)}")
    return WriterFailed("the background writer died before finishing")


class ForkWriter:
    """Forked children, at most ``writing`` of them writing at once, collected in the order they were started.

    Each child snapshots the namespace at its own cell boundary, so every cell gets
    its own checkpoint even when earlier ones are still being written. Results are
    JSON handed back through a file and passed to ``done`` oldest first, so
    checkpoints are committed in the order they were taken. A result is the child's
    outcome or its error, with the kernel that commits it, as ``encode`` makes it
    (signed) and ``decode`` checks it; its file is dated when the child began, so that
    every gc keeps what it names until it is committed (``LocalBlobs.oldest_lease``),
    by its kernel or, if that died first, by ``adopt``. ``reserve`` is the
    headroom the watcher keeps, in bytes (default: ``memory.reserve``); ``linger``
    the seconds the watcher waits for another child once none is alive, before it ends.
    """

    def __init__(
        self,
        tmp_dir: Path,
        encode: Callable[[Any], Any],
        decode: Callable[[Any], Any],
        writing: int = 2,
        alive: int = 4,
        reserve: int | None = None,
        linger: float = WATCHER_LINGERS,
        stall: float = STALL,
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
        self._reserve = reserve
        self.stopped: str | None = None  # why a child was last stopped for memory, for the kernel's life
        self._stall = stall
        self.stalled: str | None = None  # why a child was stopped as stuck: the kernel then writes itself
        self._lock = threading.Lock()  # held to reap, to kill from the watcher, and to start or end the watcher
        self._watcher: threading.Thread | None = None
        self._forked = threading.Condition(self._lock)  # told when a child is forked, while the watcher lingers
        self._linger = linger
        self._kernel = [os.getpid(), started(os.getpid())]  # who commits the results: told from a later process

    @property
    def busy(self) -> bool:
        self.poll()
        return bool(self._children)

    def cpu_seconds(self) -> float:
        """CPU time used by every child so far, those still running too: on a machine with few cores,
        what a writer takes from the cells."""
        self._reap()
        return self._reaped_cpu + sum(_cpu_so_far(c.pid) for c in self._children if not c.exited)

    def copies_fit(self) -> bool:
        """Whether a child forked now would leave the kernel room to copy what it shares.

        Until a child was stopped for memory, yes. After that, only while the
        kernel could rewrite all its private memory beside a child and still leave
        the reserve (or while that cannot be known): the cells that ran memory
        short once may do it again.
        """
        if self.stopped is None:
            return True
        room, estimate = memory.headroom(), memory.copy_estimate()
        return room is None or estimate is None or estimate <= room.free - self._reserve_for(room)

    def _reserve_for(self, room: memory.Headroom) -> int:
        return memory.reserve(room) if self._reserve is None else self._reserve

    def _reap_one(self, pid: int) -> int | None:
        """Reap ``pid`` if it has exited, charging its CPU time: its wait status, or None while it runs."""
        reaped = _reaped(pid)
        if reaped is None:
            return None
        status, cpu = reaped
        self._reaped_cpu += cpu
        return status

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
        result = self._tmp / f"result.{owner()}.{self._started}.json"  # a gc passes it over while the kernel lives
        wait_on, gate = os.pipe()
        listen, tell = os.pipe() if progress is not None else (-1, -1)
        self._hold_full_collections()
        pid = os.fork()
        if pid == 0:  # the child: no streams, no logging, no sockets, and never return
            code, text, began = 1, "", time.time()
            try:
                memory.first_victim()
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt is for the user's cell
                _run_when_idle()
                _one_thread_for_torch()
                gc.disable()  # a collection would touch (and so copy) every tracked object's page
                for other in [gate, listen] + [c.gate for c in self._children if c.gate is not None]:
                    if other >= 0:
                        os.close(other)  # so that the kernel's death ends this child's wait
                os.read(wait_on, 1)
                # Encoded here, so that a result JSON cannot hold is this child's error, said as any other.
                outcome = job(None if tell < 0 else _teller(tell))
                text = json.dumps(self._encode({"kernel": self._kernel, "ok": outcome}))
                code = 0
            except BaseException as e:
                error = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc(limit=5)}
                text = json.dumps(self._encode({"kernel": self._kernel, **error}))
            finally:
                try:
                    # Named after this child, which lives until the rename: a gc never takes it for a dead kernel's.
                    tmp = self._tmp / f"part.{owner()}.{self._started}"
                    tmp.unlink(missing_ok=True)  # a link planted under its name is replaced, never written through
                    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), "w") as f:
                        f.write(text)
                    os.utime(tmp, (began, began))
                    tmp.replace(result)
                except OSError as e:  # the disk filled up or went read-only: said as such by its exit code
                    code = _EXIT_FOR.get(e.errno or 0, 1)
                    with contextlib.suppress(OSError):
                        tmp.unlink()  # a gc would collect it once this child is gone, if the disk lets it
                finally:
                    os._exit(code)
        os.close(wait_on)
        if progress is not None:
            os.close(tell)  # the child's exit then closes the last writer: the end of its reports
        self._children.append(_Child(pid, result, done, gate, None if progress is None else (listen, progress)))
        self._release()
        with self._lock:
            if self._watcher is None:
                self._watcher = threading.Thread(target=self._watch, name="jupyter-ckpt-memory", daemon=True)
                self._watcher.start()
            else:
                self._forked.notify()

    def _watch(self) -> None:
        """Kill every child when the headroom falls below the reserve; end once no child was alive for ``linger``.

        A thread of the kernel at normal priority, so it runs however busy the
        idle-class children keep the cores. Each round reads a few small files
        (/proc/meminfo, the cgroup's: about 0.1 ms) and the children's exit
        states, and touches nothing of the namespace. A killed child frees the
        pages only it still maps: the originals of those the kernel copied.
        Between children it waits, so that a Run All's next checkpoint finds it
        running: starting a thread just after a fork took 1-2.6 ms of the pause.
        """
        while True:
            time.sleep(WATCH_EVERY)
            room = memory.headroom()
            with self._lock:
                alive = [c for c in list(self._children) if not c.exited and not _exited(c.pid)]
                if room is None or (not alive and not self._forked.wait(self._linger)):
                    self._watcher = None
                    return
                if not alive:  # a child was forked meanwhile: watch it from the next round
                    continue
                now = time.monotonic()
                for child in alive:
                    if child.gate is None and child.stopped is None and _stalled(child, now, self._stall):
                        self.stalled = child.stopped = (
                            f"stopped a checkpoint writer that waited {self._stall:g} s without running, on something "
                            "a forked process does not have (a lock another thread held, a thread pool)"
                        )
                        os.kill(child.pid, signal.SIGKILL)
                if room.free >= self._reserve_for(room):
                    continue
                reason = (
                    f"stopped a checkpoint writer: only {room}, "
                    "and each page the kernel writes while a writer shares it is a copy"
                )
                self.stopped = reason
                for child in alive:
                    if child.stopped is None:
                        child.stopped = reason
                        os.kill(child.pid, signal.SIGKILL)

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
        with self._lock:  # the watcher kills only children not reaped yet
            self._dropped = [pid for pid in self._dropped if self._reap_one(pid) is None]
            for child in self._children:
                if child.status is None:
                    child.status = self._reap_one(child.pid)
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
                _await_exit(child.pid)
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
            _follow(child)  # what it told before the wait began, if it ended first
            os.close(child.report[0])
        try:
            text = read_own_file(child.result, RESULT_MAX).decode()
            payload = json.loads(text)
        except (OSError, ValueError, RecursionError, MemoryError):  # not a whole result: one put in its place too
            error = _failure(child)
            if isinstance(error, WriterStopped):
                self.stopped = str(error)
            child.done(None, error)
            return
        finally:
            with contextlib.suppress(OSError):  # a read-only disk refuses even to delete what is not there
                child.result.unlink(missing_ok=True)
        try:
            result = self._decode(payload)
        except Exception as e:  # not what the child wrote: a file put in its place (``decode`` checks a signature)
            child.done(None, e)
            return
        if isinstance(result, dict) and "error" in result:  # the child's own, signed: said and acted on as it says
            child.done(None, WriterFailed(str(result["error"])))
        elif isinstance(result, dict) and "ok" in result:
            child.done(result["ok"], None)
        else:
            child.done(None, WriterFailed(f"the background writer left no result but {text[:100]!r}"))


def result_blobs(outcome: list[Any]) -> dict[str, BlobInfo]:
    """The blobs a writer's outcome references, as its result file holds them (``[manifest, blobs, hashed]``)."""
    return {b[0]: BlobInfo(*b) for b in outcome[1]}


# The word in the name a result takes while a process adopts it (``adopt``).
ADOPTING = "adopting"
# What a result that fails its signature check is said to be.
RESULT = "a checkpoint writer's result"


def adopt(
    store: Store, sessions: Collection[str] | None = None, notify: Callable[[str], None] = lambda message: None
) -> list[int]:
    """Commit the checkpoints whose writer finished after its kernel died (killed before it committed them), to
    the sessions they were taken in (only ``sessions``, if given), each after its kernel's newest checkpoint there
    (``session.kernel_head``: another kernel on the notebook may have checkpointed since), else after the newest
    checkpoint there, in the order they were taken. Returns their ids. What a writer left that holds no checkpoint
    goes: its error, a result its blobs are gone from; one that is not signed with this store's secret is said
    (``notify``) and goes too.

    Every gc calls it before it collects (``Timeline.thin``), and a kernel as it starts on a session: a state fully
    written is never lost to a gc that found its kernel dead. A result is renamed after this process before it
    is committed, so that two processes never commit one twice; one whose adopter died is adopted again.
    """
    found = []
    for path in store.blobs.tmp.glob("result.*.json"):
        try:
            if owner_alive(path.name, path.stat().st_mtime):  # its kernel, or its adopter, lives: it is not read
                continue
            result = store.unseal(json.loads(read_own_file(path, RESULT_MAX)), RESULT)
            pid, start = result["kernel"]
            if start is not None and started(pid) == start:  # its kernel lives, and commits it
                continue
            if "ok" not in result:  # the writer failed: nothing to adopt
                _discard(path)
                continue
            manifest, blobs = result["ok"][0], result_blobs(result["ok"])
        except FileNotFoundError:  # committed by its kernel, or adopted by another process, meanwhile
            continue
        except IntegrityError as e:  # planted by someone who can write the store, not by a writer
            notify(f"jupyter-ckpt: {path} was removed: {e}")
            _discard(path)
            continue
        except OSError as e:  # no file a writer leaves (a directory, a pipe, a link) or one the system will not read
            why = f"{path}: {e.strerror}" if e.strerror else str(e)  # the latter names it
            notify(f"jupyter-ckpt: a file in the checkpoint store was passed over: {why}")
            _discard(path)
            continue
        except (ValueError, KeyError, TypeError, IndexError, RecursionError, MemoryError):
            _discard(path)  # no result: nothing to adopt
            continue
        if sessions is not None and manifest["session"] not in sessions:
            continue
        claimed = path.with_name(f"result.{owner()}.{ADOPTING}.{secrets.token_hex(8)}.json")
        try:
            path.rename(claimed)
        except OSError:  # adopted or committed meanwhile, or a store that cannot be written (read-only): kept
            continue
        found.append((float(manifest["time"]), (pid, start), manifest, blobs, path, claimed))
    adopted = []
    lines: dict[Process, int | None] = {}  # each dead kernel's newest checkpoint, as its states are committed
    for _, kernel, manifest, blobs, path, claimed in sorted(found, key=lambda item: item[0]):  # in the order taken
        session = manifest["session"]
        try:
            if kernel not in lines:
                lines[kernel] = kernel_head(store.root, store.unseal, kernel)
            parent = lines[kernel] = _parent(store, session, lines[kernel])
            try:
                before = store.manifest(parent) if parent is not None else None
            except CheckpointError:  # the newest is damaged: the state is kept all the same, every variable changed
                before = None
            committed = lines[kernel] = store.commit(session, capture.link(manifest, parent, before), blobs)
            adopted.append(committed)
        except IntegrityError:  # its blobs are gone or damaged, or it is in the store already: nothing to adopt
            _discard(claimed)
        except CheckpointError:  # the store is busy, full or cannot be written: kept for the next adopter
            with contextlib.suppress(OSError):
                claimed.rename(path)
        else:
            _discard(claimed)
    return adopted


def _parent(store: Store, session: str, head: int | None) -> int | None:
    """Where an adopted state goes in ``session``: after its kernel's newest checkpoint (``head``) if that is one of
    the session's, else after the session's newest."""
    if head is not None:
        with contextlib.suppress(CheckpointError):
            if store.get(head).session == session:
                return head
    try:
        newest = store.checkpoints(session)[-1:]
    except UnknownSession:
        newest = []
    return newest[0].id if newest else None


def _discard(path: Path) -> None:
    """Delete what a writer left, on a store that may not let it (read-only): left there then."""
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)

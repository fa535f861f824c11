"""How much memory is left before something is killed, and how much a forked writer may make the kernel copy.

A forked writer shares the kernel's pages; each page the kernel writes while a
child still maps it is copied, so a cell that rewrites its data in place can
need as much memory again as the kernel holds. The headroom is what the
tightest limit leaves: the host's or the memory cgroup's the kernel runs in (v2
or v1, including the limits of the groups above it). The host's is
``MemAvailable`` less the kernel's own reclaimable caches (``KReclaimable``:
dentries, inodes): ``MemAvailable`` counts them as room, but a dentry a tmpfs
file or an open file holds cannot be freed, and the out-of-memory killer has
run here with 610 MiB of them still counted. A
cgroup's usage counts the page cache its processes filled, and the writers
write gigabytes; the cache's inactive part is reclaimed before anything is
killed, so it is counted as free, as the kubelet counts a container's working
set. A writer gives back the pages it has stored (``give_back``), so that the
kernel need not copy them.

The headroom is read from files under roots given as parameters, so tests can
lay out a cgroup of their own.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import OutOfMemory
from .units import human_bytes

PROC = Path("/proc")
CGROUPS = Path("/sys/fs/cgroup")
_MADV_DONTNEED = 4
# A cgroup v1 limit this large is the "no limit" value (the page counter's maximum, rounded to pages).
_UNLIMITED = 1 << 60
_MIB = 1 << 20


@dataclass(frozen=True)
class Headroom:
    """Bytes that can still be used before the out-of-memory killer runs, under the tightest limit."""

    free: int
    limit: int  # the bytes that limit allows in all (MemTotal, or the cgroup's limit)
    source: str  # whose limit: "host" or "cgroup /a/b"

    def __str__(self) -> str:
        return f"{self.free // _MIB} MiB of memory left ({self.source} limit)"


def headroom(proc: Path = PROC, cgroups: Path = CGROUPS, *, swap: bool = False) -> Headroom | None:
    """The smaller of the host's and the cgroups' headroom for this process; None where ``/proc`` cannot tell.
    With ``swap``, the host's free swap counts as its room too."""
    try:
        meminfo = (proc / "meminfo").read_text()
    except OSError:
        return None
    available, total = _value(meminfo, "MemAvailable:"), _value(meminfo, "MemTotal:")
    if available is None or total is None:
        return None
    kernel_caches = _value(meminfo, "KReclaimable:") or _value(meminfo, "SReclaimable:") or 0
    swapped = (_value(meminfo, "SwapFree:") or 0) if swap else 0
    tightest = Headroom(max(0, available - kernel_caches + swapped) << 10, total << 10, "host")
    for room in _cgroup_headrooms(proc, cgroups):
        if room.free < tightest.free:
            tightest = room
    return tightest


def reserve(room: Headroom) -> int:
    """Bytes to keep free: the larger of 256 MiB and 2% of the limit.

    The watcher polls every few tens of milliseconds and a stopped child takes a
    moment to free its pages, while a cell can copy a gigabyte a second; the
    reserve covers that, and leaves the rest of the machine room to allocate.
    """
    return max(256 * _MIB, room.limit // 50)


def ensure_room(nbytes: int, what: str, proc: Path = PROC, cgroups: Path = CGROUPS) -> None:
    """Raise OutOfMemory unless ``nbytes`` more leave the reserve of the headroom; ``what`` takes them
    (``reading a``).

    A restore reads a checkpoint whole before it lets go of the variables it
    replaces, so going back to a large state can need that state's memory again:
    past the headroom, the out-of-memory killer would end the kernel and all its
    work. The host's free swap counts: the killer waits for it, and a slow restore
    is no loss (the watcher does not count it: a stopped writer costs only time).
    The margin left beside it is the reserve, or as much again as a smaller read
    takes: a restore of a few small variables on a busy host is not refused for a
    reserve meant for writers. Where the headroom cannot be read, nothing is refused.
    """
    if nbytes <= 0:  # nothing to read (an undo's unchanged buffers): the headroom is not read (0.13 ms)
        return
    room = headroom(proc, cgroups, swap=True)
    margin = min(reserve(room), nbytes) if room is not None else 0
    if room is None or nbytes + margin <= room.free:
        return
    raise OutOfMemory(
        f"not restored: {what} takes about {human_bytes(nbytes)} of memory, and only {room}, which leaves less "
        f"than {human_bytes(margin)} beside it; nothing was changed. Free memory (del the variables you no longer "
        "need), or restart the kernel and restore there"
    )


def copy_estimate(proc: Path = PROC) -> int | None:
    """The most a fork can make this process copy: its private resident memory (``RssAnon``), or None if unknown.

    Only anonymous pages are copied on write; file pages are read again from
    their file. ``RssAnon`` is a counter; ``smaps_rollup``'s ``Anonymous`` is the
    same figure but walks the page tables (1.3 ms for 2 GiB).
    """
    try:
        kib = _value((proc / "self" / "status").read_text(), "RssAnon:")
    except OSError:
        return None
    return None if kib is None else kib << 10


def first_victim() -> None:
    """Make this process the first the out-of-memory killer picks (``oom_score_adj`` 1000).

    Called in a forked writer: killing it frees exactly the originals of the
    pages the kernel copied, and the kernel and every other process live on.
    """
    with contextlib.suppress(OSError):
        (PROC / "self" / "oom_score_adj").write_text("1000")


class _PyBuffer(ctypes.Structure):  # CPython's Py_buffer: only ``buf`` and ``len`` are read
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.c_void_p),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    ]


@functools.cache
def libc() -> ctypes.CDLL:
    """The C library, keeping ``errno``, with the argument types of each call this package makes of it."""
    lib = ctypes.CDLL(None, use_errno=True)
    lib.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    lib.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
    lib.syscall.restype = ctypes.c_long
    lib.mmap.restype = ctypes.c_void_p
    lib.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    return lib


def ioctl(fd: int, request: int, arg: ctypes.Structure) -> int:
    """``ioctl(fd, request, &arg)``: its result, or an OSError with its ``errno``."""
    result = int(libc().ioctl(fd, request, ctypes.byref(arg)))
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return result


def mappings() -> Iterator[tuple[int, int, str, str]]:
    """This process's memory mappings as ``/proc/self/maps`` lists them: start, end, mode (``rw-p``) and name
    (empty for anonymous memory)."""
    with open("/proc/self/maps") as lines:
        for line in lines:
            fields = line.split(maxsplit=5)
            lo, hi = fields[0].split("-")
            yield int(lo, 16), int(hi, 16), fields[1], fields[5].strip() if len(fields) > 5 else ""


@functools.cache
def _buffer_calls() -> tuple[Any, Any]:
    """CPython's buffer calls, with their own argument types (not ``ctypes.pythonapi``'s)."""
    python = ctypes.PyDLL(None)
    get, release = python.PyObject_GetBuffer, python.PyBuffer_Release
    get.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
    release.argtypes = [ctypes.POINTER(_PyBuffer)]
    release.restype = None
    return get, release


def span(view: memoryview) -> tuple[int, int]:
    """The addresses a contiguous buffer's bytes occupy, read-only buffers included: [start, end)."""
    get, release = _buffer_calls()
    buffer = _PyBuffer()
    if get(view, ctypes.byref(buffer), 0) != 0:  # PyBUF_SIMPLE: the bytes as they lie
        raise ValueError("not a contiguous buffer")
    start = buffer.buf or 0
    release(ctypes.byref(buffer))
    return start, start + buffer.len


def give_back(view: memoryview) -> None:
    """In a forked writer: stop mapping the whole pages that lie inside ``view``, bytes it has stored and will
    not read again (``MADV_DONTNEED``).

    A page the kernel has not written since the fork is then the kernel's alone,
    and its next write to it reuses the page instead of copying it; a page the
    kernel has already copied frees its original. Only ever called in a forked
    child: in the kernel, the pages would read as zeros. Where the call fails (a
    locked mapping), the pages stay mapped, as before.
    """
    start, end = span(view)
    lo, hi = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE, end // mmap.PAGESIZE * mmap.PAGESIZE
    if hi > lo:
        libc().madvise(lo, hi - lo, _MADV_DONTNEED)


def _cgroup_headrooms(proc: Path, cgroups: Path) -> list[Headroom]:
    """The headroom under each memory cgroup limit that applies to this process: its group's and its ancestors'."""
    try:
        lines = (proc / "self" / "cgroup").read_text().splitlines()
    except OSError:
        return []
    rooms = []
    for line in lines:
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        _, controllers, path = fields
        if controllers == "":  # v2: one hierarchy, "0::/path"
            rooms += _levels(cgroups, path, ("memory.max", "memory.current", "inactive_file "))
        elif "memory" in controllers.split(","):  # v1: the memory controller's own hierarchy
            rooms += _levels(
                cgroups / "memory", path, ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file ")
            )
    return rooms


def _levels(root: Path, path: str, files: tuple[str, str, str]) -> list[Headroom]:
    """The headroom at each level from ``root/path`` up to ``root`` that has a limit.

    In a container the group's path names a place the container's view of the
    hierarchy does not have; its own limit is then at a level above it.
    """
    limit_file, usage_file, inactive = files
    rooms = []
    parts = [p for p in path.split("/") if p]
    for depth in range(len(parts), -1, -1):
        level = root.joinpath(*parts[:depth])
        try:
            text = (level / limit_file).read_text().strip()
            if text == "max" or int(text) >= _UNLIMITED:
                continue
            limit = int(text)
            used = int((level / usage_file).read_text())
        except (OSError, ValueError):
            continue
        try:
            reclaimable = _value((level / "memory.stat").read_text(), inactive) or 0
        except OSError:
            reclaimable = 0
        rooms.append(Headroom(max(0, limit - used + reclaimable), limit, "cgroup /" + "/".join(parts[:depth])))
    return rooms


def _value(text: str, name: str) -> int | None:
    """The number after ``name`` at the start of a line (``/proc/meminfo``, ``memory.stat``), or None."""
    at = ("\n" + text).find("\n" + name)
    if at < 0:
        return None
    with contextlib.suppress(ValueError, IndexError):
        return int(text[at + len(name) :].split(None, 1)[0])
    return None

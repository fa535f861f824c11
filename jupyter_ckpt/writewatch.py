"""Which pages of the kernel's large buffers were written since the newest checkpoint was taken (Linux).

An undo decides from the bytes which chunks of a live buffer differ from its target (``restore._patches``),
and hashing every chunk of a 4 GiB namespace takes 0.2-0.4 s. The writer of the newest checkpoint hashed
those chunks already, as they were when it started. A chunk none of whose pages was written since then
still holds what the writer hashed: its key is known without reading it.

The evidence comes from the page tables, not from object ids. Linux 6.7 and later write-protect memory
registered with a userfaultfd in asynchronous mode (``UFFD_FEATURE_WP_ASYNC``) when ``PAGEMAP_SCAN`` asks;
the first write to such a page afterwards, from any thread, from a system call reading into it, or through
``/proc/<pid>/mem``, takes a fault that the kernel resolves itself, marking the page written. ``arm`` does
that just before each writer starts; ``learn`` keeps what the writer hashed, if no other arm came between;
``keys`` answers, per chunk, the key hashed then or None if a page of the chunk may have changed since.

A buffer the cells rewrite is not watched. The first write to a protected huge page splits it into small
pages (the kernel tracks writes page by page), and a protected page is never merged into a huge one again,
so a watched array that every cell rewrites would stay in small pages: its loops 4-7% slower, and every
fork copying 512 times as many page table entries for it. An undo has to read such a buffer anyway. So a
buffer most of whose chunks changed between two writers is left out until one finds it unchanged, and its
memory is merged into huge pages again once no writer shares it (``make_writable``).

A page counts as unchanged only inside memory this watch registered: private anonymous mappings (what
numpy, bytearrays and pickle buffers live in). A file mapping or shared memory, whose pages another
process can change without touching this process's page tables, is never registered; memory unmapped and
mapped again (an array freed, another made at the same address) is a new mapping, never registered; a
page moved by ``mremap`` or dropped by ``MADV_DONTNEED`` reads as written. Each such case is a test in
``tests/test_writewatch.py``. What no page table sees is a device writing by DMA into memory pinned for it
(an array registered with ``cudaHostRegister``): docs/design.md says so. Where the mechanism is missing
(another system, a kernel before 6.7, a seccomp filter refusing ``userfaultfd``), every chunk is hashed.
"""

from __future__ import annotations

import bisect
import contextlib
import ctypes
import mmap
import os
import platform
import re
import sys
import weakref
from collections.abc import Iterable

from . import memory
from .capture import CHUNK

PAGE = mmap.PAGESIZE

# A buffer the writer saw, as it hashed it: its address, size and chunk keys.
Seen = tuple[int, int, list[str]]

# Buffers smaller than this are hashed: each registered one is a mapping of its own in the kernel.
WATCH_MIN = 4 * CHUNK

_SYSCALL = {"x86_64": 323, "aarch64": 282}  # userfaultfd
_USER_MODE_ONLY = 1  # allowed without privileges (vm.unprivileged_userfaultfd = 0); async faults need no more
_FEATURE_WP_ASYNC = 1 << 15
_REGISTER_MODE_WP = 1 << 1
_SCAN_WP_MATCHING = 1 << 0
_IS_WPALLOWED, _IS_WRITTEN, _IS_PRESENT = 1 << 0, 1 << 1, 1 << 3
_MADV_POPULATE_WRITE = 23  # Linux 5.14
_MADV_COLLAPSE = 25  # Linux 6.1
HUGE = 2 << 20  # a huge page (x86-64 and arm64 with 4 KiB pages)
# In /proc/self/pagemap, the top byte of a present page (bit 63) that this process alone maps (bit 56), not
# swapped, not a file's, and not write-protected by this watch (bit 57): a run of these bytes, a run of pages.
_EXCLUSIVE_RUN = re.compile(rb"\x81+")
_PAGEMAP_READ = 1 << 16  # pages whose entries are read at once: 512 KiB
_VEC = 1024  # regions returned per PAGEMAP_SCAN call


def _iowr(kind: int, nr: int, size: int, read_only: bool = False) -> int:
    return ((2 if read_only else 3) << 30) | (size << 16) | (kind << 8) | nr


_UFFDIO_API = _iowr(0xAA, 0x3F, 24)
_UFFDIO_REGISTER = _iowr(0xAA, 0x00, 32)
_UFFDIO_UNREGISTER = _iowr(0xAA, 0x01, 16, read_only=True)
_PAGEMAP_SCAN = _iowr(ord("f"), 16, 96)


class _Range(ctypes.Structure):
    _fields_ = [("start", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Api(ctypes.Structure):
    _fields_ = [("api", ctypes.c_uint64), ("features", ctypes.c_uint64), ("ioctls", ctypes.c_uint64)]


class _Register(ctypes.Structure):
    _fields_ = [("range", _Range), ("mode", ctypes.c_uint64), ("ioctls", ctypes.c_uint64)]


class _Scan(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint64)
        for name in [
            *("size", "flags", "start", "end", "walk_end", "vec", "vec_len", "max_pages"),
            *("category_inverted", "category_mask", "category_anyof_mask", "return_mask"),
        ]
    ]


class _Region(ctypes.Structure):
    _fields_ = [("start", ctypes.c_uint64), ("end", ctypes.c_uint64), ("categories", ctypes.c_uint64)]


def _pages(address: int, size: int) -> tuple[int, int]:
    """The page-aligned range that covers a buffer."""
    return address // PAGE * PAGE, -(-(address + size) // PAGE) * PAGE


def address_of(view: memoryview) -> int | None:
    """Where a writable buffer's bytes are; None for a read-only one (never watched)."""
    if view.readonly or not view.contiguous:
        return None
    return ctypes.addressof(ctypes.c_char.from_buffer(view))


def _anonymous_mappings(writable: bool = False) -> list[tuple[int, int]]:
    """This process's private anonymous mappings, or only the writable ones, in order (``/proc/self/maps``)."""
    spans = []
    for lo, hi, mode, name in memory.mappings():
        if mode[3] != "p" or (writable and mode[:2] != "rw"):
            continue
        if not name or name == "[heap]" or name.startswith("[anon:"):
            spans.append((lo, hi))
    return sorted(spans)


def _private_anonymous(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Those ranges lying wholly in private anonymous mappings."""
    spans = _anonymous_mappings()
    kept = []
    for lo, hi in ranges:
        # Adjacent private anonymous mappings are one span for this purpose: merge as we go.
        i = bisect.bisect_right(spans, (lo, sys.maxsize)) - 1
        end = spans[i][1] if i >= 0 and spans[i][0] <= lo else lo
        while end < hi and i + 1 < len(spans) and spans[i + 1][0] == end:
            i += 1
            end = spans[i][1]
        if end >= hi:
            kept.append((lo, hi))
    return kept


def _rewritten(keys: list[str], before: tuple[int, list[str]] | None, size: int) -> bool:
    """Whether most chunks of a buffer changed since the writer before hashed it (at the same address)."""
    if before is None or before[0] != size:
        return False
    return 2 * sum(key != old for key, old in zip(keys, before[1], strict=True)) > len(keys)


def observed(view: memoryview, keys: list[str]) -> Seen | None:
    """What a writer reports of a buffer it hashed, if it is large and writable enough to be watched."""
    address = address_of(view) if view.nbytes >= WATCH_MIN else None
    return None if address is None else (address, view.nbytes, keys)


class WriteWatch:
    """The pages written since the last ``arm``, for the buffers the last writer hashed (see the module)."""

    def __init__(self) -> None:
        self._uffd = self._pagemap = -1
        self._epoch = 0
        self._registered: set[tuple[int, int]] = set()  # page ranges, registered with the userfaultfd
        self._armed: set[tuple[int, int]] = set()  # those write-protected by the last arm
        self._known: dict[int, tuple[int, list[str]]] = {}  # address -> size and chunk keys, as of the epoch
        self._learned: dict[int, tuple[int, list[str]]] = {}  # the same, as the last writer learned hashed them
        self._available = False  # not here: every chunk is hashed
        self._vec = (_Region * _VEC)()
        if sys.platform == "linux" and platform.machine() in _SYSCALL:
            self._open()

    def _open(self) -> None:
        uffd = memory.libc().syscall(_SYSCALL[platform.machine()], os.O_CLOEXEC | os.O_NONBLOCK | _USER_MODE_ONLY)
        if uffd < 0:
            return
        self._uffd, self._available = uffd, True
        weakref.finalize(self, os.close, uffd)
        try:
            memory.ioctl(uffd, _UFFDIO_API, _Api(0xAA, _FEATURE_WP_ASYNC, 0))
            self._pagemap = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
            weakref.finalize(self, os.close, self._pagemap)
            self._scan(*_pages(id(self), 1), flags=0, mask=0)  # PAGEMAP_SCAN exists (Linux 6.7)
        except OSError:
            self._available = False

    @property
    def available(self) -> bool:
        return self._available

    def _scan(self, lo: int, hi: int, *, flags: int, mask: int, inverted: int = 0) -> list[tuple[int, int]]:
        """The regions of [lo, hi) whose pages match ``mask`` (after ``inverted``), walking it to its end."""
        found: list[tuple[int, int]] = []
        while lo < hi:
            arg = _Scan(96, flags, lo, hi, 0, ctypes.addressof(self._vec), _VEC, 0, inverted, mask, 0, mask or 1)
            for region in self._vec[: memory.ioctl(self._pagemap, _PAGEMAP_SCAN, arg)]:
                if found and found[-1][1] == region.start:  # one run, returned in two calls
                    found[-1] = (found[-1][0], region.end)
                else:
                    found.append((region.start, region.end))
            lo = arg.walk_end
        return found

    def arm(self) -> int:
        """Just before a writer starts: forget what was known, and mark from now on the pages written.

        Returns the epoch to give ``learn`` with what that writer hashed.
        """
        self._epoch += 1
        self._known = {}
        self._armed = set()
        for lo, hi in list(self._registered):
            try:
                self._scan(lo, hi, flags=_SCAN_WP_MATCHING, mask=_IS_WPALLOWED)
            except OSError:
                self._registered.discard((lo, hi))  # unmapped meanwhile: nothing there to protect
            else:
                self._armed.add((lo, hi))
        return self._epoch

    def learn(self, epoch: int, hashed: Iterable[Seen]) -> None:
        """What the writer started after ``arm`` returned ``epoch`` hashed; ignored if another arm came since.

        The buffers' memory is registered here, after the writer started, so it is protected only from the
        next arm: until then its chunks are hashed (a page not yet protected reads as written, but a page
        dropped since the writer started reads as unwritten, as it would after an arm).
        """
        if not self.available or epoch != self._epoch:
            return
        before = self._learned
        self._known = self._learned = {address: (size, keys) for address, size, keys in hashed}
        watched = (_pages(a, s) for a, (s, keys) in self._known.items() if not _rewritten(keys, before.get(a), s))
        wanted = set(_private_anonymous(watched))
        for lo, hi in self._registered - wanted:
            with contextlib.suppress(OSError):  # unmapped: nothing registered any more
                memory.ioctl(self._uffd, _UFFDIO_UNREGISTER, _Range(lo, hi - lo))
        for lo, hi in wanted - self._registered:
            try:
                memory.ioctl(self._uffd, _UFFDIO_REGISTER, _Register(_Range(lo, hi - lo), _REGISTER_MODE_WP, 0))
            except OSError:
                wanted.discard((lo, hi))
        self._registered = wanted

    def left_protected(self) -> list[tuple[int, int]]:
        """The runs of pages a fork may have left write-protected, to make writable again (``make_writable``).

        After a fork, Linux write-protects every page of private memory in both processes; once the child has
        exited, the first write to each page in this one still takes a fault, about a microsecond each, which
        the next cells pay (80,000 faults over five cells of ``benchmarks/notebooks/smallobjs.ipynb``). These
        are the present pages of the private writable anonymous memory that this process alone maps: a page
        another process still maps (a writer, a worker forked by the user's code) would be copied instead.
        Pages this watch protects are left out, since a write there is what it watches for. Empty where
        ``PAGEMAP_SCAN`` is missing.
        """
        if not self.available:
            return []
        runs = []
        for lo, hi in _anonymous_mappings(writable=True):
            try:
                present = self._scan(lo, hi, flags=0, mask=_IS_PRESENT)
            except OSError:  # unmapped meanwhile
                continue
            for start, end in present:
                for at in range(start, end, _PAGEMAP_READ * PAGE):  # in reads of a bounded size
                    size = min(end - at, _PAGEMAP_READ * PAGE) // PAGE * 8
                    try:
                        entries = os.pread(self._pagemap, size, at // PAGE * 8)
                    except OSError:
                        continue
                    for match in _EXCLUSIVE_RUN.finditer(entries[7::8]):
                        runs.append((at + match.start() * PAGE, at + match.end() * PAGE))
        return runs

    def make_writable(self, lo: int, hi: int) -> None:
        """Make pages writable in one pass, as a write to each would, without writing them
        (``MADV_POPULATE_WRITE``); a page unmapped meanwhile is skipped with its mapping.

        Where a large buffer the last writer hashed covers whole huge pages of the range, those are merged
        into huge pages first (``MADV_COLLAPSE``, a copy of each): a write beside a writer, or to a watched
        page, split them. The kernel refuses a huge page holding a page this watch protects; the range holds
        only memory this process alone maps (``left_protected``).
        """
        libc = memory.libc()
        for address, (size, _) in self._learned.items():
            first = -(-max(lo, address) // HUGE) * HUGE
            last = min(hi, address + size) // HUGE * HUGE
            if first < last:
                libc.madvise(first, last - first, _MADV_COLLAPSE)
        libc.madvise(lo, hi - lo, _MADV_POPULATE_WRITE)

    def keys(self, view: memoryview) -> list[str | None]:
        """Per chunk of a live byte buffer: the key its writer hashed, if no page of it was written since the
        arm before that writer, else None (hash it)."""
        unknown: list[str | None] = [None] * -(-view.nbytes // CHUNK)
        address = address_of(view)
        if address is None or self._known.get(address, (-1, []))[0] != view.nbytes:
            return unknown
        lo, hi = _pages(address, view.nbytes)
        if (lo, hi) not in self._armed:
            return unknown
        try:  # pages of registered memory, protected and not written since
            clean = self._scan(lo, hi, flags=0, mask=_IS_WPALLOWED | _IS_WRITTEN, inverted=_IS_WRITTEN)
        except OSError:
            return unknown
        starts = [start for start, _ in clean]
        keys: list[str | None] = []
        for index, key in enumerate(self._known[address][1]):
            first = address + index * CHUNK
            last = min(address + view.nbytes, first + CHUNK)
            i = bisect.bisect_right(starts, first) - 1
            keys.append(key if i >= 0 and clean[i][1] >= last else None)
        return keys

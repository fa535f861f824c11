"""One writable buffer made of page-aligned pieces of files, read only as it is touched (Linux).

A lazy restore gives a large array this buffer instead of reading its chunks:
the array is usable at once, and each page is read from its chunk file the
first time it is touched. The mapping is private (copy-on-write): writing to
the array never changes a file, and a file removed later (``gc``) stays
readable through the mapping.

Python's ``mmap`` cannot place a mapping at a given address, so the pieces are
mapped with libc's ``mmap(MAP_FIXED)`` over one anonymous region that Python
owns: when the last view of the region goes, it is unmapped whole.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import sys
from pathlib import Path

from .memory import libc

_MAP_FIXED = 0x10  # the same on every Linux architecture
HUGE_MIN = 4 << 20  # numpy's threshold for asking for huge pages

# (where in the buffer, file, offset in the file, length); where and offset are multiples of the page size.
Piece = tuple[int, Path, int, int]


def supported() -> bool:
    return sys.platform == "linux"


def private_memory(size: int) -> mmap.mmap:
    """``size`` bytes of zeroed anonymous memory that a fork copies on write.

    ``mmap.mmap(-1, size)`` alone is a *shared* mapping: parent and forked child
    see each other's writes, so a child writing a checkpoint would read the
    cells that ran after its snapshot and store a state that never existed.
    """
    return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


def array_memory(size: int) -> memoryview:
    """``size`` bytes of ``private_memory`` for a buffer read in whole, in huge pages from 4 MiB, as numpy
    asks for its own arrays: filling it then takes one page fault per 2 MiB instead of one per 4 KiB, and the
    restored array is held as the one its cell made was."""
    region = private_memory(size)
    if size >= HUGE_MIN and hasattr(mmap, "MADV_HUGEPAGE"):
        with contextlib.suppress(OSError):  # a kernel without transparent huge pages
            region.madvise(mmap.MADV_HUGEPAGE)
    return memoryview(region)


def map_pieces(size: int, pieces: list[Piece]) -> memoryview:
    """A private, writable buffer of ``size`` bytes whose contents are the pieces' file bytes.

    Raises OSError if a piece cannot be mapped; nothing stays mapped then.
    """
    region = private_memory(size)
    anchor = ctypes.c_char.from_buffer(region)
    base = ctypes.addressof(anchor)
    del anchor  # release the export, so the region can be unmapped when its views go
    try:
        for start, path, offset, length in pieces:
            if start % mmap.PAGESIZE or offset % mmap.PAGESIZE or start + length > size:
                raise OSError(f"{path}: piece at {start}+{length} (file offset {offset}) cannot be mapped")
            fd = os.open(path, os.O_RDONLY)
            try:
                prot = mmap.PROT_READ | mmap.PROT_WRITE
                got = libc().mmap(base + start, length, prot, mmap.MAP_PRIVATE | _MAP_FIXED, fd, offset)
            finally:
                os.close(fd)
            if got != base + start:
                err = ctypes.get_errno()
                raise OSError(err, f"mmap of {path}: {os.strerror(err)}")
    except BaseException:
        region.close()
        raise
    return memoryview(region)

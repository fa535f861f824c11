"""writewatch.py: a chunk's key is taken as known only when no page of it can have changed since it was hashed.

Each test is one way the shortcut could be wrong: a write it must see (from a thread, from a system call,
through /proc/self/mem, by the kernel dropping the pages), memory that is not what was registered (mapped
again at the same address, a file mapping another process writes), or knowledge from another writer's
epoch. The first test shows the shortcut at work, so that the others do not pass for want of it.
"""

from __future__ import annotations

import ctypes
import errno
import gc
import mmap
import os
import resource
import signal
import threading
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import huge_bytes

from jupyter_ckpt.capture import CHUNK
from jupyter_ckpt.checkpointer import Checkpointer
from jupyter_ckpt.memory import libc
from jupyter_ckpt.restore import _chunk_keys
from jupyter_ckpt.store import Store
from jupyter_ckpt.writewatch import _MADV_COLLAPSE, HUGE, PAGE, WATCH_MIN, WriteWatch, _pages, address_of, observed

pytestmark = pytest.mark.skipif(not WriteWatch().available, reason="needs userfaultfd WP_ASYNC and PAGEMAP_SCAN")

SIZE = 8 * CHUNK
MIDDLE = CHUNK // 2  # a page here lies in one chunk; a page at a chunk's edge may also hold its neighbour's bytes


@pytest.fixture(autouse=True)
def earlier_watches_closed() -> None:
    """Close the userfaultfds of earlier tests' watches, which reference cycles keep until a collection.

    Memory one of them registered stays registered after it is freed, if it lies in glibc's heap, and a
    buffer placed there again cannot be registered by another watch (EBUSY): it is hashed, never watched.
    """
    gc.collect()


def watched(buffer: memoryview, rounds: int = 2) -> WriteWatch:
    """A watch that knows the keys of ``buffer``: the first round registers it, the next arms it."""
    watch = WriteWatch()
    for _ in range(rounds):
        epoch = watch.arm()
        seen = observed(buffer, _chunk_keys(buffer))
        assert seen is not None
        watch.learn(epoch, [seen])
    return watch


def unknown(watch: WriteWatch, buffer: memoryview) -> list[int]:
    return [i for i, key in enumerate(watch.keys(buffer)) if key is None]


@pytest.fixture
def array() -> np.ndarray:
    return np.random.default_rng(0).random(SIZE // 8)


def flat(a: np.ndarray) -> memoryview:
    return memoryview(a).cast("B")


def test_nothing_written_since_the_writer_started_means_every_key_is_known(array: np.ndarray) -> None:
    watch = watched(flat(array))
    assert unknown(watch, flat(array)) == []
    assert watch.keys(flat(array)) == _chunk_keys(flat(array))


def test_memory_registered_after_the_writer_started_is_not_trusted_until_armed(array: np.ndarray) -> None:
    watch = watched(flat(array), rounds=1)
    assert unknown(watch, flat(array)) == list(range(8))
    start = -(-(address_of(flat(array)) or 0) // PAGE) * PAGE + CHUNK  # a page inside chunk 1, dropped
    assert libc().madvise(ctypes.c_void_p(start), PAGE, 4) == 0  # before any arm: it may not read as written
    assert unknown(watch, flat(array)) == list(range(8))


def test_a_write_from_the_cells_thread_or_another_is_seen(array: np.ndarray) -> None:
    watch = watched(flat(array))
    array[(2 * CHUNK + MIDDLE) // 8] = -1.0
    thread = threading.Thread(target=lambda: array.__setitem__((6 * CHUNK + MIDDLE) // 8, -1.0))
    thread.start()
    thread.join()
    assert unknown(watch, flat(array)) == [2, 6]


def test_a_system_call_reading_into_the_buffer_is_seen(array: np.ndarray, tmp_path: Path) -> None:
    watch = watched(flat(array))
    source = tmp_path / "bytes"
    source.write_bytes(os.urandom(PAGE))
    with source.open("rb", buffering=0) as f:
        f.readinto(flat(array)[3 * CHUNK + MIDDLE : 3 * CHUNK + MIDDLE + PAGE])
    assert unknown(watch, flat(array)) == [3]


def test_a_write_through_proc_self_mem_is_seen(array: np.ndarray) -> None:
    watch = watched(flat(array))
    with open("/proc/self/mem", "r+b", buffering=0) as mem:
        mem.seek((address_of(flat(array)) or 0) + 5 * CHUNK + MIDDLE)
        mem.write(b"changed")
    assert unknown(watch, flat(array)) == [5]


def test_pages_the_kernel_dropped_read_as_written(array: np.ndarray) -> None:
    watch = watched(flat(array))
    start = -(-(address_of(flat(array)) or 0) // PAGE) * PAGE + CHUNK  # a page inside chunk 1
    assert libc().madvise(ctypes.c_void_p(start), PAGE, 4) == 0  # MADV_DONTNEED: it reads as zeros now
    assert unknown(watch, flat(array)) == [1]


def test_memory_mapped_again_at_the_same_address_is_not_trusted(array: np.ndarray) -> None:
    watch = watched(flat(array))
    lo = -(-(address_of(flat(array)) or 0) // PAGE) * PAGE
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x10  # MAP_FIXED: a new mapping over the old pages
    assert libc().mmap(lo, 4 * CHUNK, mmap.PROT_READ | mmap.PROT_WRITE, flags, -1, 0) == lo
    assert unknown(watch, flat(array)) == [0, 1, 2, 3, 4]  # chunk 4 shares its first page with the new mapping


def test_a_file_mapping_is_never_trusted(tmp_path: Path) -> None:
    path = tmp_path / "shared.bin"
    path.write_bytes(os.urandom(SIZE))
    with path.open("r+b") as f, mmap.mmap(f.fileno(), SIZE) as shared:
        view = memoryview(shared)
        try:
            watch = watched(view)
            with path.open("r+b") as other:  # another process's write changes no page table of this one
                other.write(b"changed")
            assert unknown(watch, view) == list(range(8))
        finally:
            view.release()


def test_what_a_writer_hashed_is_forgotten_when_another_starts(array: np.ndarray) -> None:
    watch = watched(flat(array))
    epoch = watch.arm()  # a save that failed, or whose writer has not reported yet
    assert unknown(watch, flat(array)) == list(range(8))
    watch.learn(epoch - 1, [(address_of(flat(array)) or 0, SIZE, _chunk_keys(flat(array)))])  # too late
    assert unknown(watch, flat(array)) == list(range(8))


def test_small_or_read_only_buffers_are_not_watched(array: np.ndarray) -> None:
    assert observed(flat(array)[: WATCH_MIN - 1], []) is None
    array.flags.writeable = False
    assert observed(flat(array), []) is None


def test_an_undo_reads_the_bytes_changed_between_cells(store: Store) -> None:
    """End to end: after two checkpoints the undo takes the known keys, and still restores a change that
    a thread made after the newest one."""
    module = types.ModuleType("__main__")
    first = np.random.default_rng(0).random(SIZE // 8)
    module.__dict__["table"] = first.copy()
    table = module.__dict__["table"]
    ckpt = Checkpointer(store, "watch.ipynb", module)
    ckpt.save(trigger="cell")
    table[0] = -1.0
    ckpt.save(trigger="cell")
    ckpt.wait()
    table[0] = first[0]
    ckpt.save(trigger="cell")  # holds the first state again; the watch knows its keys
    ckpt.wait()
    assert unknown(ckpt._watch, flat(table)) == []
    table[(7 * CHUNK + MIDDLE) // 8] = -2.0  # as a widget callback would, after the newest checkpoint
    report = ckpt.restore("-1")  # table[0] == -1.0
    assert report.patched == ["table"]
    expected = first.copy()
    expected[0] = -1.0
    assert np.array_equal(table, expected)


def checkpointed_records(store: Store) -> tuple[Checkpointer, list[dict[str, Any]]]:
    """200,000 small records in a namespace, checkpointed by a forked writer that has exited since."""
    module = types.ModuleType("__main__")
    rows = module.__dict__["records"] = [{"id": i, "tags": [i], "score": 0.5} for i in range(200_000)]
    ckpt = Checkpointer(store, "nb.ipynb", module, background=True)
    ckpt.save(trigger="cell")
    ckpt.wait()  # the writer has exited: the pages it shared are still write-protected here
    return ckpt, rows


def faults_writing(rows: list[dict[str, Any]]) -> int:
    """The minor page faults a cell takes writing one field of every record."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for row in rows:
        row["score"] += 1
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def private_dirty() -> int:
    """Bytes of memory this process alone has written (``/proc/self/smaps_rollup``)."""
    with open("/proc/self/smaps_rollup") as rollup:
        return sum(int(line.split()[1]) << 10 for line in rollup if line.startswith("Private_Dirty:"))


def test_once_its_writer_is_gone_the_next_cell_is_spared_a_fault_on_every_page(store: Store) -> None:
    ckpt, rows = checkpointed_records(store)
    left = faults_writing(rows)
    ckpt.save(trigger="cell")
    ckpt.wait()
    ckpt.make_writable_again()
    assert faults_writing(rows) < left / 20, left


def test_a_cell_that_starts_stops_the_pages_being_made_writable(store: Store) -> None:
    ckpt, rows = checkpointed_records(store)
    ckpt.make_writable_again(idle=lambda: False)  # a cell is running: it may fork processes of its own
    assert faults_writing(rows) > 5_000


def test_pages_a_process_forked_by_the_user_still_maps_are_not_copied(store: Store) -> None:
    ckpt, rows = checkpointed_records(store)
    worker = os.fork()  # a worker of the user's, as multiprocessing forks it: it shares every page
    if worker == 0:
        signal.pause()
        os._exit(0)
    try:
        before = private_dirty()
        ckpt.make_writable_again()
        assert private_dirty() - before < 16 << 20  # the records alone are over 50 MiB
        assert faults_writing(rows) > 5_000  # still shared, so still protected
    finally:
        os.kill(worker, signal.SIGKILL)
        os.waitpid(worker, 0)


def test_making_pages_writable_again_leaves_the_watched_buffers_unwritten(store: Store) -> None:
    module = types.ModuleType("__main__")
    module.__dict__["table"] = np.random.default_rng(0).random(SIZE // 8)
    ckpt = Checkpointer(store, "nb.ipynb", module, background=True)
    for _ in range(2):  # the first writer's buffers are registered, the second's armed
        ckpt.save(trigger="cell")
        ckpt.wait()
    assert unknown(ckpt._watch, flat(module.__dict__["table"])) == []
    ckpt.make_writable_again()
    assert ckpt._writable_after == ckpt._forks  # the tick made the pages writable again
    assert unknown(ckpt._watch, flat(module.__dict__["table"])) == []


def rewritten_table(store: Store) -> tuple[Checkpointer, np.ndarray]:
    """A table watched since its second checkpoint, which the next cell rewrites while that one's writer runs."""
    # After the suite's earlier tests, glibc took the table from free memory of its heap, in pages already
    # touched, so small ones: that memory goes back to the system first, and the table's pages are new ones.
    libc().malloc_trim(0)
    module = types.ModuleType("__main__")
    table = module.__dict__["table"] = np.random.default_rng(0).random(SIZE // 8)
    if huge_bytes(table) < SIZE // 2:
        pytest.skip("this machine gave the table no huge pages")
    ckpt = Checkpointer(store, "nb.ipynb", module, background=True)
    for _ in range(2):
        ckpt.save(trigger="cell")
        ckpt.wait()
    # Watched, as its registration shows: its pages' states are not asked, since in full runs a few read as
    # written without a write (the safe way to err), twice in more than one chunk.
    assert _pages(table.ctypes.data, table.nbytes) in ckpt._watch._registered
    ckpt.save(trigger="cell")
    table *= 2.0  # beside the writer, and on pages the watch protects
    ckpt.wait()
    return ckpt, table


def test_a_buffer_the_cells_rewrite_is_not_watched_and_gets_its_huge_pages_back(store: Store) -> None:
    ckpt, table = rewritten_table(store)
    assert huge_bytes(table) < SIZE // 2  # the write split them
    ckpt.save(trigger="cell")  # its writer learns every chunk changed
    ckpt.wait()
    ckpt.make_writable_again()
    held = huge_bytes(table)
    merged = held >= SIZE - 4 * HUGE  # at most four huge pages short: its two ends are partial ones
    short = not merged and not collapsible(table)
    assert merged or short, f"{held >> 20} MiB in huge pages, though the kernel could merge them"
    table *= 0.5
    assert unknown(ckpt._watch, flat(table)) == list(range(8))  # not watched: an undo reads it
    report = ckpt.restore("latest")  # the table as the rewrite left it
    assert report.patched == ["table"]
    assert np.array_equal(table, np.random.default_rng(0).random(SIZE // 8) * 2.0)
    if short:
        pytest.skip("the kernel had no huge page to give (a merge asked by the test failed too): not checked")


def collapsible(table: np.ndarray) -> bool:
    """Whether the kernel can merge the table's pages into huge pages now: false where it is short of memory or
    of free huge pages (ENOMEM, EAGAIN), as after other processes held most of it."""
    lo = -(-table.ctypes.data // HUGE) * HUGE
    hi = (table.ctypes.data + table.nbytes) // HUGE * HUGE
    return libc().madvise(lo, hi - lo, _MADV_COLLAPSE) == 0 or ctypes.get_errno() not in (errno.ENOMEM, errno.EAGAIN)


def test_a_rewritten_buffer_left_alone_is_watched_again(store: Store) -> None:
    ckpt, table = rewritten_table(store)
    table_pages = _pages(table.ctypes.data, table.nbytes)
    ckpt.save(trigger="cell")  # its writer learns every chunk changed
    ckpt.wait()
    assert table_pages not in ckpt._watch._registered
    ckpt.save(trigger="cell")  # and this one, that none did since
    ckpt.wait()
    assert table_pages in ckpt._watch._registered

"""SIGKILL at many moments of a checkpoint write never corrupts the store."""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import struct
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from conftest import cli, descendants

from jupyter_ckpt.restore import restore_namespace
from jupyter_ckpt.store import Store
from jupyter_ckpt.timeline import good_states, lineage

# Kill moments: (what to wait for, then how long after it). "start" is the cell's start, spread over the
# ~0.3 s a 64 MB checkpoint takes to write here; "write" is the first blob file in blobs/tmp, so that some
# kills land in the middle of a write however fast or slow this machine is today.
MOMENTS = [("start", 0.0), ("start", 0.06), ("start", 0.15), ("start", 0.3), ("start", 0.7)]
MOMENTS += [("write", 0.0), ("write", 0.005), ("write", 0.02), ("write", 0.05)]


def _writing(tmp: Path, before: set[Path]) -> bool:
    """Whether a blob file that was not in ``before`` is being written (earlier rounds' orphans stay)."""
    return bool(set(tmp.iterdir()) - before)


def _wait_for_a_blob_write(tmp: Path, before: set[Path], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not _writing(tmp, before):
        assert time.monotonic() < deadline, "the checkpoint of `big` never began writing a blob"
        time.sleep(0.001)


def test_sigkill_mid_write_leaves_every_earlier_checkpoint_restorable(kernels: Any, store: Store) -> None:
    tmp = store.root / "blobs" / "tmp"
    mid_write = 0
    for i, (after, delay) in enumerate(MOMENTS):
        k = kernels("killed.ipynb")
        k.ok("%load_ext jupyter_ckpt")
        k.ok(f"import numpy as np\nround_ = {i}")
        k.ok("%checkpoint wait")  # a small checkpoint that is complete
        before = set(tmp.iterdir())
        k.kc.execute(f"big = np.random.default_rng({i}).random(8_000_000)\nround_ = {i} + 0.5")
        if after == "write":
            _wait_for_a_blob_write(tmp, before)
        time.sleep(delay)
        mid_write += _writing(tmp, before)
        for pid in [k.pid, *descendants(k.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        k.kill()

    assert cli("verify").returncode == 0
    records = store.checkpoints("killed.ipynb")
    rounds = set()
    for record in records:
        module = types.ModuleType("__main__")
        restore_namespace(store.blobs, module, record.id, store.manifest(record.id))
        rounds.add(module.__dict__["round_"])
        if "big" in module.__dict__:
            assert module.__dict__["big"].shape == (8_000_000,)
    assert set(range(len(MOMENTS))) <= rounds  # every completed small checkpoint is there and restores
    assert mid_write > 0, "no kill landed in the middle of a write: the test proved nothing"
    files, _ = store.gc()
    assert files > 0  # the killed writers' half-written blobs, which only gc removes
    assert cli("verify").returncode == 0


def _writer_of(k: Any, tmp: Path, before: set[Path]) -> list[int]:
    """The kernel's writers, once one of them is writing a blob of the cell sent last (a blob's temp file is
    named after its content's key, 32 hex digits)."""
    deadline = time.monotonic() + 30
    while not any(len(p.name.split(".")[0]) == 32 for p in set(tmp.iterdir()) - before):
        assert time.monotonic() < deadline, "the checkpoint of `big` never began writing a blob"
        time.sleep(0.001)
    return descendants(k.pid)


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] in "ZX"
    except OSError:
        return True


def test_a_gc_after_the_kernel_was_killed_adopts_what_its_writer_finished(kernels: Any, store: Store) -> None:
    """The kernel is killed while its writer writes the last cell's state; the writer finishes. A gc from another
    process, while the writer still writes and after it finished, then a new kernel: the state comes back (the
    gc took the writer's blobs and its result for garbage, and the state was lost although fully written)."""
    tmp = store.root / "blobs" / "tmp"
    k = kernels("adopted.ipynb")
    k.ok("%load_ext jupyter_ckpt\nimport numpy as np\nround_ = 0")
    k.ok("%checkpoint wait")
    before = set(tmp.iterdir())
    k.kc.execute("big = np.random.default_rng(7).random(8_000_000)\nround_ = 1")
    writers = _writer_of(k, tmp, before)
    os.kill(k.pid, signal.SIGKILL)  # the kernel alone, as the out-of-memory killer does: its writer goes on
    while k.km.is_alive():  # reaped, as the server's restarter reaps it
        time.sleep(0.01)
    assert writers and not all(_gone(pid) for pid in writers), "the writer ended with its kernel"
    assert cli("gc").returncode == 0  # while the writer writes
    deadline = time.monotonic() + 60
    while not all(_gone(pid) for pid in writers):
        assert time.monotonic() < deadline, "the writer never finished"
        time.sleep(0.02)
    assert cli("gc").returncode == 0  # after it finished, before any kernel adopted its result
    assert cli("verify").returncode == 0
    assert len(store.checkpoints("adopted.ipynb")) == 2  # the gc committed it: listed before any kernel starts
    k.close()
    k = kernels("adopted.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint restore latest")
    assert k.value("round_") == 1
    assert k.value("bool((big == __import__('numpy').random.default_rng(7).random(8_000_000)).all())") is True


@contextlib.contextmanager
def _creations(folder: Path) -> Iterator[Callable[[Callable[[str], bool]], str]]:
    """Within the block, ``first(wanted)`` waits for the first file made in ``folder`` whose name is ``wanted`` and
    returns its name, as the OS kernel tells it (inotify): at once, where polling the folder misses a file that
    lives for a few milliseconds."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    assert fd >= 0 and libc.inotify_add_watch(fd, str(folder).encode(), 0x100) >= 0  # IN_CREATE

    def first(wanted: Callable[[str], bool]) -> str:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if not select.select([fd], [], [], 1)[0]:
                continue
            data = os.read(fd, 1 << 16)
            while data:
                _, _, _, length = struct.unpack_from("iIII", data)
                name = data[16 : 16 + length].rstrip(b"\0").decode()
                if wanted(name):
                    return name
                data = data[16 + length :]
        raise AssertionError(f"no file as wanted was made in {folder} within 60 s")

    try:
        yield first
    finally:
        os.close(fd)


def test_a_gc_as_the_kernel_dies_leaves_its_writer_s_result_that_is_being_written(kernels: Any, store: Store) -> None:
    """The kernel dies while its writer writes its result (the manifest, left for the kernel to commit) to a temp
    file, and a gc from another process runs right then. The temp file was named after the kernel, which was dead:
    the gc deleted it under the writer, whose rename then failed, and the state, fully written, was lost. It is
    named after the writer, which lives, so the gc passes it over, and adopts the result once it is there."""
    tmp = store.root / "blobs" / "tmp"
    k = kernels("dying.ipynb")
    k.ok("%load_ext jupyter_ckpt\nround_ = 0")
    k.ok("%checkpoint wait")
    with _creations(tmp) as first:
        # Variables of long names: a manifest of 18 MB, which takes its writer milliseconds to write.
        k.kc.execute("for i in range(300):\n    globals()['v' * 30_000 + str(i)] = i\nround_ = 1")
        part = first(lambda name: name.endswith(".part") or name.startswith("part."))
        # Its children, read from the threads that fork them: at once, where a scan of /proc takes milliseconds.
        writers = [
            int(pid)
            for task in Path(f"/proc/{k.pid}/task").iterdir()
            for pid in (task / "children").read_text().split()
        ]
        for pid in writers:
            os.kill(pid, signal.SIGSTOP)
    assert (tmp / part).exists(), "the writer renamed its result before it was stopped: the test proved nothing"
    os.kill(k.pid, signal.SIGKILL)
    while k.km.is_alive():  # reaped, as the server's restarter reaps it
        time.sleep(0.01)
    assert cli("gc").returncode == 0  # as the kernel dies, while its writer is between writing and renaming
    for pid in writers:
        os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + 60
    while not all(_gone(pid) for pid in writers):
        assert time.monotonic() < deadline, "the writer never finished"
        time.sleep(0.02)
    assert cli("gc").returncode == 0  # it adopts the result
    assert len(store.checkpoints("dying.ipynb")) == 2
    k.close()
    k = kernels("dying.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint restore latest")
    assert k.value("(round_, globals()['v' * 30_000 + '299'])") == (1, 299)


def test_a_gc_passes_over_a_live_kernel_s_writer_result_without_reading_it(kernels: Any, store: Store) -> None:
    """A writer's result waits in the store until its kernel commits it: a kernel busy in a cell, or stopped (a
    debugger, ``kill -STOP``), leaves it there a while. Every gc read each such result whole (up to 128 MiB) and
    checked its signature, only to find its kernel alive and leave it. The owner is in the name: it is not read."""
    tmp = store.root / "blobs" / "tmp"
    k = kernels("live.ipynb")
    k.ok("%load_ext jupyter_ckpt\nimport numpy as np\nround_ = 0")
    k.ok("%checkpoint wait")
    before = set(tmp.iterdir())
    k.kc.execute("big = np.random.default_rng(3).random(4_000_000)\nround_ = 1")
    writers = _writer_of(k, tmp, before)
    os.kill(k.pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 60
        while not all(_gone(pid) for pid in writers):
            assert time.monotonic() < deadline, "the writer never finished"
            time.sleep(0.02)
        (result,) = tmp.glob("result.*.json")
        seen = result.stat().st_atime_ns
        assert cli("gc").returncode == 0
        assert result.stat().st_atime_ns == seen  # its content was not read
    finally:
        os.kill(k.pid, signal.SIGCONT)
    k.ok("%checkpoint wait")
    assert k.value("[r.cell for r in __import__('jupyter_ckpt').list()]") == [1, 3]
    assert k.value("round_") == 1


def test_a_killed_kernel_s_state_its_writer_finished_continues_its_own_line_beside_another_kernel(
    kernels: Any, store: Store
) -> None:
    """Two kernels on one notebook; one is killed while its writer writes its last cell's state, and a gc adopts
    that state. It was put after the notebook's newest checkpoint, the other kernel's: the killed kernel's crash
    recovery (which follows its own line of work) went back to its older state, and the other kernel's line held
    the killed kernel's work. It goes after the killed kernel's own newest checkpoint."""
    tmp = store.root / "blobs" / "tmp"
    a, b = kernels("shared.ipynb"), kernels("shared.ipynb")
    a.ok("%load_ext jupyter_ckpt\nimport numpy as np\nround_ = 0")
    a.ok("%checkpoint wait")
    b.ok("%load_ext jupyter_ckpt\nwho = 'b'")
    b.ok("%checkpoint wait")
    a_head, b_head = (r.id for r in store.checkpoints("shared.ipynb"))
    before = set(tmp.iterdir())
    a.kc.execute("big = np.random.default_rng(7).random(4_000_000)\nround_ = 1")
    writers = _writer_of(a, tmp, before)
    os.kill(a.pid, signal.SIGKILL)  # the kernel alone, as the out-of-memory killer does: its writer goes on
    while a.km.is_alive():
        time.sleep(0.01)
    deadline = time.monotonic() + 60
    while not all(_gone(pid) for pid in writers):
        assert time.monotonic() < deadline, "the writer never finished"
        time.sleep(0.02)
    assert cli("gc").returncode == 0
    records = store.checkpoints("shared.ipynb")
    (adopted,) = [r for r in records if r.id not in (a_head, b_head)]
    assert adopted.parent == a_head  # A's line goes on; B's has nothing of A's
    assert good_states(lineage(records, a_head))[0] == adopted.id  # what A's crash recovery restores
    assert good_states(lineage(records, b_head))[0] == b_head  # and B's

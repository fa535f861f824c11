"""Other processes holding memory, and files holding the kernel's caches: for the tests and benchmarks that need
a machine short of memory.

Each holds about 1 GiB in huge pages (about 1 s a GiB to touch here, against up to a minute in small
pages) and raises its own ``oom_score_adj`` to 500, so that if memory does run out, the killer takes one
of them before pytest, the kernel or a benchmark's driver.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from jupyter_ckpt import memory

GIB, MIB = 1 << 30, 1 << 20

HOLD = """
import mmap
import sys
with open("/proc/self/oom_score_adj", "w") as f:
    f.write("500")  # if memory does run out, the killer takes this one before pytest or the kernel
held = mmap.mmap(-1, int(sys.argv[1]))
held.madvise(mmap.MADV_HUGEPAGE)  # about 1 s a GiB here, against up to a minute in small pages
for offset in range(0, len(held), 4096):
    held[offset] = 1
print("held", flush=True)
sys.stdin.read()
"""


class Bystanders:
    """Processes that hold memory, about 1 GiB each, until released."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def leave(self, leave: int) -> None:
        """Hold all the memory but ``leave`` bytes of headroom."""
        room = memory.headroom()
        assert room is not None
        pieces = (room.free - leave) // GIB
        self._hold([GIB] * pieces + [(room.free - leave) % GIB - 32 * MIB * (pieces + 1)])
        room = memory.headroom()  # each process takes a few MiB beyond what it holds, and the cache moves
        assert room is not None
        if room.free - leave > 64 * MIB:
            self._hold([room.free - leave])

    def _hold(self, sizes: list[int]) -> None:
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True}
        started = [subprocess.Popen([sys.executable, "-c", HOLD, str(n)], **pipes) for n in sizes if n > 0]
        self.procs += started
        for proc in started:
            assert proc.stdout is not None and proc.stdout.readline() == "held\n"

    def alive(self) -> bool:
        return all(proc.poll() is None for proc in self.procs)

    def release(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.close()
            proc.stdout.close()


@contextlib.contextmanager
def leaving(leave: int) -> Iterator[Bystanders]:
    """Other processes holding all the memory but ``leave`` bytes of headroom, for the ``with`` block."""
    bystanders = Bystanders()
    try:
        bystanders.leave(leave)
        yield bystanders
    finally:
        bystanders.release()


MAKE_FILES = """
import os
import sys
folder, count = sys.argv[1], int(sys.argv[2])
os.makedirs(folder)
for i in range(count):
    os.close(os.open(f"{folder}/{i}", os.O_CREAT | os.O_WRONLY, 0o600))
"""


def kernel_caches() -> int:
    """The kernel's reclaimable caches (``KReclaimable``), in bytes."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("KReclaimable:"):
            return int(line.split()[1]) << 10
    raise AssertionError("no KReclaimable in /proc/meminfo")


def hold_kernel_caches(folder: Path, files: int = 3_000_000) -> int:
    """Make ``files`` empty files under ``folder`` (on a tmpfs), each holding a dentry the kernel counts as
    reclaimable (``KReclaimable``, which ``MemAvailable`` counts as room) but cannot free while the file exists.
    Returns how much the reclaimable caches grew (about 190 bytes a file); about 20 s on two cores."""
    before = kernel_caches()
    makers = [
        subprocess.Popen([sys.executable, "-c", MAKE_FILES, str(folder / str(n)), str(files // 2)]) for n in (0, 1)
    ]
    assert [maker.wait() for maker in makers] == [0, 0]
    return kernel_caches() - before

"""Other processes holding memory: for the tests and benchmarks that need a machine short of it.

Each holds about 1 GiB in huge pages (about 1 s a GiB to touch here, against up to a minute in small
pages) and raises its own ``oom_score_adj`` to 500, so that if memory does run out, the killer takes one
of them before pytest, the kernel or a benchmark's driver.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

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

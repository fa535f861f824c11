"""How a long save or restore tells its progress: bytes done of a total."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# Told (bytes done, bytes in all), from the thread that does the work.
Progress = Callable[[int, int], None]
# The data of the kernel's progress displays, {"what", "done", "total"}: read by the server (for a crash
# recovery) and the lab extension (labextension/src/model.ts PROGRESS_MIME).
PROGRESS_MIME = "application/vnd.jupyter-ckpt.progress+json"


def untold(done: int, total: int) -> None:
    """The progress of work nobody waits for."""


@dataclass
class Tally:
    """The bytes a save has written or a restore has read, told to its ``Progress`` at each step.

    A restore knows its total from the manifest. A save knows it only as each
    group is pickled, so it starts from a guess and ``expect`` corrects it.
    """

    total: int
    progress: Progress
    done: int = 0

    def add(self, n: int) -> None:
        self.done += n
        self.progress(self.done, self.total)

    def expect(self, total: int) -> None:
        self.total = total

    def finish(self) -> None:
        """The work is done: what was done is the total."""
        self.total = self.done
        self.progress(self.done, self.total)

"""Where checkpoints are written: in the kernel's own thread, for now."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class SyncWriter:
    """Runs each write at once, in the caller's thread."""

    busy = False

    def submit(self, job: Callable[[], Any], done: Callable[[Any], None]) -> None:
        done(job())

    def wait(self) -> None:
        """Nothing is ever in flight."""

"""A condition told to the user once, not at every cell or retry: said again only when it changes.

A failing save, a writer stopped for memory, an unreachable remote store, a store
too small for the newest checkpoint, a session the kernel cannot move to: each is
one ``Notice``. What it compares is its *reason* (by default the message itself),
so a message that carries a changing count is not said again for that alone.
"""

from __future__ import annotations

from collections.abc import Callable


class Notice:
    """One condition: ``current`` is the reason last said (None while all is well)."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self._say = say
        self.current: str | None = None

    def tell(self, message: str, reason: str | None = None) -> bool:
        """Say ``message`` unless its ``reason`` (default: the message) is the one said last; whether it was said."""
        reason = message if reason is None else reason
        new = reason != self.current
        self.current = reason
        if new:
            self._say(message)
        return new

    def clear(self, over: str | None = None) -> bool:
        """The condition is over: say ``over`` if it had been told; returns whether it had."""
        was, self.current = self.current is not None, None
        if was and over is not None:
            self._say(over)
        return was

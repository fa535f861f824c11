"""jupyter-ckpt: checkpoints of a Jupyter kernel's namespace, with a timeline to roll back.

In a kernel, ``%load_ext jupyter_ckpt`` turns it on; the functions below are
the same verbs as the ``%checkpoint`` magic, for use from code.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import CheckpointError
from .restore import Diff, RestoreReport
from .store import Cell, CheckpointRecord

if TYPE_CHECKING:
    from .checkpointer import Checkpointer, Status

__all__ = [
    "CheckpointError",
    "__version__",
    "delete",
    "diff",
    "exclude",
    "here",
    "history",
    "include",
    "list",
    "replay",
    "restore",
    "save",
    "status",
    "tag",
    "undo",
    "untag",
    "wait",
]


def _ckpt() -> Checkpointer:
    from .extension import active

    return active()


def save(message: str | None = None, tag: str | None = None) -> int:
    """Checkpoint the namespace now; returns the checkpoint id."""
    checkpoint_id = _ckpt().save(trigger="manual", message=message, tag=tag)
    assert checkpoint_id is not None  # a manual checkpoint is written before save returns
    return checkpoint_id


def restore(
    ref: str | int = "latest", only: Iterable[str] | str | None = None, replay: str | None = None
) -> RestoreReport:
    """Roll the namespace back to ``ref`` (id, ``#N``, tag, ``latest``, ``last-good``, ``previous``, ``-1``);
    with ``only`` (names, or ``"a,b"``), only those variables.

    ``replay`` (``ask``, ``auto``, ``never``; default: the ``replay`` option) says what to do with the
    variables the checkpoint could not hold: offer to run their cells again, run them, or only name them.
    """
    return _ckpt().restore(ref, only=only, replay_mode=replay)


def replay() -> dict[str, str]:
    """Run the cells that rebuild what the last restore could not bring back; returns what each variable got."""
    return _ckpt().replay()


def undo() -> RestoreReport:
    """Back to the state before the last cell."""
    return _ckpt().undo()


def diff(a: str | int | None = None, b: str | int | None = None) -> Diff:
    """Variables added, removed and changed from ``a`` (default: last checkpoint) to ``b`` (default: now)."""
    return _ckpt().diff(a, b)


def tag(ref: str | int, name: str) -> CheckpointRecord:
    """Name the checkpoint ``ref``: a savepoint, never thinned away; returns its record."""
    return _ckpt().tag(ref, name)


def untag(ref: str | int) -> CheckpointRecord:
    """Take the tag of the checkpoint ``ref`` (its id, or the tag itself) away: thinning may take it then; returns
    its record."""
    return _ckpt().tag(ref, None)


def list() -> builtins.list[CheckpointRecord]:  # noqa: A001 - the verb users know
    """The session's checkpoints, oldest first."""
    return _ckpt().checkpoints()


def delete(ref: str | int) -> CheckpointRecord:
    """Remove the checkpoint ``ref`` from the timeline (its data goes at the next gc); returns its record."""
    return _ckpt().delete(ref)


def exclude(*names: str) -> builtins.list[str]:
    """Keep these variables out of checkpoints from now on (remembered for the session); returns every name kept
    out."""
    return _ckpt().exclude(names).exclude


def include(*names: str) -> builtins.list[str]:
    """Put excluded variables back in checkpoints; returns the names still kept out."""
    return _ckpt().include(names).exclude


def history(ref: str | int | None = None) -> builtins.list[Cell]:
    """The cells executed up to ``ref`` (default: now), oldest first: each one's ``count``, ``source``,
    ``status`` and ``duration``."""
    return _ckpt().history(ref)


def status() -> Status:
    """Where things stand, as ``%checkpoint status`` shows it: the store, session, policy, count, bytes, the last
    checkpoint's age, whether a background write is in progress, the variables skipped and why."""
    return _ckpt().status()


def wait() -> None:
    """Block until the state the cells before this call left is durable on disk, under any automatic policy
    (checkpointed now if the policy skipped it), as is every checkpoint already requested; and the last
    restore is verified. Call it right before something risky."""
    _ckpt().settle()


def here() -> bool:
    """A milestone checkpoint inside a long loop, rate-limited by the policy; returns whether this call took one
    (written in the background; ``wait()`` makes it durable)."""
    return _ckpt().here()


def load_ipython_extension(ipython: Any) -> None:
    from .errors import CheckpointError
    from .extension import load, refused_at_start, starting_up

    try:
        load(ipython)
    except CheckpointError as e:
        if not starting_up():  # ``%load_ext`` in a cell: its one-line error
            raise
        refused_at_start(ipython, e)


def unload_ipython_extension(ipython: Any) -> None:
    from .extension import unload

    unload(ipython)


def _jupyter_server_extension_points() -> builtins.list[dict[str, Any]]:
    from .server import CkptServerApp

    return [{"module": "jupyter_ckpt.server", "app": CkptServerApp}]


def _jupyter_labextension_paths() -> builtins.list[dict[str, str]]:
    return [{"src": "labextension", "dest": "jupyter-ckpt"}]

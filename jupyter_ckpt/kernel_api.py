"""The kernel's side of the server's requests: one ``dispatch`` with JSON in and out.

The server evaluates ``dispatch(get_ipython(), request)`` silently (see
``kernelclient``). ``request`` is ``{"verb": ..., "args": {...}, "resume": ...}``;
the extension is loaded first when it is not, and the verb runs on the
Checkpointer the extension keeps on the shell.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from IPython.core.interactiveshell import InteractiveShell

from .errors import CheckpointError, reading_store
from .extension import CellHooks, hooks
from .session import SERVER, SessionKey


def _session(cell_hooks: CellHooks) -> str:
    return cell_hooks.ckpt.session


def _catch_up(cell_hooks: CellHooks, notebook: str | None = None) -> str:
    """Checkpoint the cells a frontend ran before the extension was loaded; the kernel's session. ``notebook`` is the
    JPY_SESSION_NAME the server started the kernel with, which a kernelspec's wrapper may have kept from it."""
    if notebook is not None:
        cell_hooks.started_on(notebook)
    cell_hooks.catch_up()
    return cell_hooks.ckpt.session


def _crashed(cell_hooks: CellHooks) -> dict[str, Any]:
    """The kernel the server restarted after a crash, before anything is restored into it: its session (the one the
    crashed kernel was in, if the user had named it) and how it was chosen, and the crashed kernel's newest
    checkpoint (None if it left none)."""
    head = cell_hooks.back_after_crash()
    return {"session": cell_hooks.ckpt.session, "source": cell_hooks.session.source, "head": head}


def _rename(cell_hooks: CellHooks, old: str, new: str) -> str:
    """The server renamed this kernel's notebook from ``old`` to ``new`` (both session keys): its checkpoints and
    the kernel go on under the new path, and the kernel no longer goes back to the old one at its next cell (its
    ``JPY_SESSION_NAME`` is the old path). A session the user named, or another notebook's, stays. The kernel's
    session."""
    if cell_hooks.session.source == SERVER and cell_hooks.ckpt.session == old:
        cell_hooks.go_to(SessionKey(new, SERVER), take_along=True)
    return cell_hooks.ckpt.session


def _save(cell_hooks: CellHooks, message: str | None = None, tag: str | None = None) -> int | None:
    return cell_hooks.ckpt.save(trigger="manual", message=message, tag=tag)


def _restore(
    cell_hooks: CellHooks, checkpoint: int, replay: str | None = None, trigger: str = "restore"
) -> dict[str, Any]:
    """Restore a checkpoint; its summary, the variables running their cells again would rebuild, and the code
    of those cells."""
    report = cell_hooks.ckpt.restore(checkpoint, replay_mode=replay, trigger=trigger)
    return {"summary": report.summary(), "replayable": report.replayable, "replay_cells": report.replay_cells}


def _replay(cell_hooks: CellHooks) -> dict[str, str]:
    return cell_hooks.ckpt.replay()


def _offer(cell_hooks: CellHooks) -> dict[str, Any] | None:
    return cell_hooks.ckpt.resume_offer()


VERBS: dict[str, Callable[..., Any]] = {
    "session": _session,
    "catch_up": _catch_up,
    "crashed": _crashed,
    "rename": _rename,
    "save": _save,
    "restore": _restore,
    "replay": _replay,
    "offer": _offer,
}


def dispatch(shell: InteractiveShell, request: str) -> str:
    """Run one request of the server in this kernel; returns the verb's result as JSON."""
    call = json.loads(request)
    verb = VERBS[call["verb"]]  # only the server sends requests: an unknown verb is its bug, a KeyError
    if not call["resume"]:
        shell.config.Checkpoints.restore_on_start = False
    if shell.extension_manager is not None:
        shell.extension_manager.load_extension("jupyter_ckpt")
    cell_hooks = hooks(shell)
    if cell_hooks is None:
        raise CheckpointError("jupyter-ckpt did not load in this kernel")
    with reading_store(cell_hooks.ckpt.store.root):  # a store file the system will not read: one clear error
        return json.dumps(verb(cell_hooks, **call["args"]))

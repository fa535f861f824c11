"""``%checkpoint timeline``: the session's checkpoints as a live widget.

A thin adapter over the ``Checkpointer``: the browser side (TypeScript in
``labextension/src/widget/``, bundled by npm into ``static/widget.js``) draws
what the traits below hold and sends back what the user clicked; the actions
call ``restore``, ``tag`` and ``delete`` like the magics do. A daemon thread
re-reads the catalog every ``poll`` seconds, so checkpoints written in the
background (or by ``here()`` inside a running loop) show up as they land.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from .checkpointer import Checkpointer
from .errors import CheckpointError
from .timeline import tree_rows

_HERE = Path(__file__).parent


class Timeline(anywidget.AnyWidget):
    """The timeline of one kernel's session: select a checkpoint to see it, then restore, tag or delete it."""

    _esm = _HERE / "static" / "widget.js"
    _css = _HERE / "widget.css"

    session = traitlets.Unicode("").tag(sync=True)
    rows = traitlets.List(traitlets.Dict(), help="the checkpoints in timeline order (timeline.tree_rows)").tag(
        sync=True
    )
    head = traitlets.Int(None, allow_none=True, help="the checkpoint the namespace is at now").tag(sync=True)
    selected = traitlets.Int(None, allow_none=True, help="the checkpoint the user clicked").tag(sync=True)
    details = traitlets.Dict(help="timeline.details() of the selected checkpoint, or {} if none is").tag(sync=True)
    message = traitlets.Unicode("", help="the outcome of the last action, for the user").tag(sync=True)
    error = traitlets.Bool(False, help="whether message reports a failure").tag(sync=True)

    def __init__(self, ckpt: Checkpointer, poll: float = 1.0, **kwargs: Any) -> None:
        super().__init__(session=ckpt.session, **kwargs)
        self._ckpt = ckpt
        self._stop = threading.Event()
        self._refresh_lock = threading.Lock()
        self.refresh()
        self.on_msg(self._on_action)
        self._poller = threading.Thread(target=self._poll, args=(poll,), name="jupyter-ckpt-timeline", daemon=True)
        self._poller.start()

    def refresh(self) -> None:
        """Re-read the timeline; traits change (and the browser redraws) only if something did."""
        with self._refresh_lock:
            rows = tree_rows(self._ckpt.checkpoints())
            with self.hold_sync():
                if rows != self.rows:
                    self.rows = rows
                self.head = self._ckpt.head
                if self.selected is not None and all(r["id"] != self.selected for r in rows):
                    self.selected = None

    def _poll(self, every: float) -> None:
        while not self._stop.wait(every):
            try:
                self.refresh()
            except CheckpointError:  # the store is briefly unreadable; the next round will tell
                continue

    @traitlets.observe("selected")
    def _show_selected(self, change: dict[str, Any]) -> None:
        try:
            self.details = {} if change["new"] is None else self._ckpt.timeline.details(change["new"])
        except CheckpointError as e:  # deleted meanwhile (another view, the server): said, as an action's error
            self.details = {}
            self.message, self.error = str(e), True

    def _on_action(self, _widget: Any, content: dict[str, Any], _buffers: list[bytes]) -> None:
        action, checkpoint_id = content.get("action"), content.get("id")
        try:
            if checkpoint_id is None:
                raise CheckpointError(f"the {action!r} action names no checkpoint")
            if action == "restore":
                outcome = self._ckpt.restore(checkpoint_id).summary()
            elif action == "tag":
                tag = content.get("tag") or None
                record = self._ckpt.tag(checkpoint_id, tag)
                name = (
                    f"kernel checkpoint #{self._ckpt.timeline.number(self._ckpt.session, record.id)} (id {record.id})"
                )
                outcome = f"{name} tagged {tag!r}" if tag else f"{name} untagged"
            elif action == "delete":
                outcome = f"kernel checkpoint (id {self._ckpt.delete(checkpoint_id).id}) deleted"
            else:
                raise CheckpointError(f"unknown action {action!r}")
        except CheckpointError as e:
            self.message, self.error = str(e), True
        else:
            self.message, self.error = outcome, False
        self.refresh()
        if self.selected is not None:
            self._show_selected({"new": self.selected})

    def close(self) -> None:
        self._stop.set()
        super().close()

"""Crash recovery: a kernel the server restarted after it died gets its last good state back.

``CrashRecovery`` watches the kernel_actions event bus. jupyter_server's
restarter notices a dead kernel process and starts a new one; it calls the
``restart`` callbacks *before* the new process exists, so the callback only
notes the death, and the work happens on the ``restart`` success event that
follows, once the new kernel can answer. A restart the user asked for emits the
same event with no death before it: it only gets the extension loaded.

It reaches kernels through ``kernelclient`` and the store through the
``CheckpointService``, whose worker threads keep SQLite off the event loop.
"""

from __future__ import annotations

import asyncio
import math
import os
import posixpath
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from logging import Logger
from typing import Any

from jupyter_events import EventLogger

from .config import CRASH_RESTART
from .errors import CheckpointError, UnknownSession
from .kernelclient import KernelConnection, KernelDied
from .service import CheckpointService
from .session import SERVER
from .timeline import good_states, lineage

KERNEL_ACTIONS = "https://events.jupyter.org/jupyter_server/kernel_actions/v1"
CONTENTS = "https://events.jupyter.org/jupyter_server/contents_service/v1"
CRASH_EVENTS = "https://events.jupyter.org/jupyter_ckpt/crash_recovery/v1"
CRASH_SCHEMA = {
    "$id": CRASH_EVENTS,
    "version": "1",
    "title": "jupyter-ckpt crash recovery",
    "personal-data": True,
    "description": "A crashed kernel was restored to a checkpoint, or could not be, or was left empty.",
    "type": "object",
    "required": ["type", "session", "kernel_id", "tried", "time", "message"],
    "properties": {
        "type": {"enum": ["crash-restore", "crash-restore-failed", "crash-restore-stopped"], "title": "what happened"},
        "session": {"type": "string", "title": "the session key (the notebook's OS path)"},
        "path": {"type": ["string", "null"], "title": "the notebook's path relative to the server root"},
        "kernel_id": {"type": "string", "title": "the kernel that crashed"},
        "checkpoint": {"type": ["integer", "null"], "title": "the checkpoint restored, or that failed to restore"},
        "tried": {"type": "array", "items": {"type": "integer"}, "title": "checkpoints restored since a cell last ran"},
        "time": {"type": "number", "title": "seconds since the epoch"},
        "message": {"type": "string", "title": "what to tell the user"},
        "replayable": {
            "type": "string",
            "title": "variables the checkpoint could not hold that running their cells again would rebuild, if any",
        },
        "replay_cells": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"count": {"type": ["integer", "null"]}, "source": {"type": "string"}},
            },
            "title": "the code replay would run (each cell's execution count and source), shown before it runs",
        },
    },
}
# A session whose kernel keeps dying gets this many states restored, then none until a cell completes.
MAX_TRIES = 2


@dataclass
class CrashLoop:
    """The crash-restores of one kernel since a cell of its own last completed."""

    newest: int  # the newest checkpoint of the kernel's line of work not made by a restore, when it crashed (0: none)
    tried: list[int] = field(default_factory=list)
    stopped: bool = False
    restoring: int | None = None  # the checkpoint being restored now
    more: bool = False  # whether another state is tried if this one kills the kernel


class CrashRecovery:
    """Loads the extension into new kernels, and restores crashed ones to their last good state."""

    def __init__(
        self,
        service: CheckpointService,
        bus: EventLogger,
        log: Logger,
        *,
        restore: bool = True,
        autoload: bool = True,
    ) -> None:
        self.service = service
        self.bus = bus
        self.log = log
        self.restore = restore
        self.autoload = autoload
        self._deaths: set[str] = set()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._loops: dict[str, CrashLoop] = {}
        # The session each kernel checkpoints into, as it said at its start: its notebook's path then. A notebook
        # renamed while its kernel runs keeps that kernel in the old session; the kernel the restarter starts
        # after a crash is on the new path (jupyter_server updates the kernel's environment).
        self._sessions: dict[str, str] = {}
        # By kernel, the session the renames sent to it and not answered yet go to (it runs a cell: they wait for
        # it), and the lock that sends them one after the other, so that they reach it in the order they were made.
        self._renaming: dict[str, tuple[str, asyncio.Lock]] = {}

    def start(self) -> None:
        self.bus.register_event_schema(CRASH_SCHEMA)
        self.bus.add_listener(schema_id=KERNEL_ACTIONS, listener=self._on_kernel_action)
        self.bus.add_listener(schema_id=CONTENTS, listener=self._on_contents)

    async def stop(self) -> None:
        self.bus.remove_listener(schema_id=KERNEL_ACTIONS, listener=self._on_kernel_action)
        self.bus.remove_listener(schema_id=CONTENTS, listener=self._on_contents)
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _on_kernel_action(self, logger: Any, schema_id: str, data: dict[str, Any]) -> None:
        kernel_id, action = data.get("kernel_id"), data["action"]
        if data.get("status") != "success" or kernel_id is None:
            return
        if action == "shutdown":
            self._deaths.discard(kernel_id)
            self.service.recovering.discard(kernel_id)
            self._loops.pop(kernel_id, None)
            self._sessions.pop(kernel_id, None)
            self._renaming.pop(kernel_id, None)
            return
        kernels = self.service.kernels
        if action == "start":
            kernels.add_restart_callback(kernel_id, lambda: self._died(kernel_id), "restart")
        spec = kernels.get_kernel(kernel_id).kernel_spec
        if action not in ("start", "restart") or spec is None or spec.language != "python":
            return
        crashed = action == "restart" and kernel_id in self._deaths
        self._deaths.discard(kernel_id)
        if crashed:  # the kernel started with it: the next restart (the user's) is not a crash's
            self._launch_env(kernel_id, "")
        if crashed and self.restore:
            self._run(kernel_id, self._recover(kernel_id))
            return
        self.service.recovering.discard(kernel_id)
        if self.autoload:
            self._run(kernel_id, self._load(kernel_id))

    async def _on_contents(self, logger: Any, schema_id: str, data: dict[str, Any]) -> None:
        """A notebook, or a folder of notebooks, renamed (or moved) in the server: their checkpoints go along, and
        so do their running kernels, so that the timeline, ``previous`` in a next kernel and crash recovery find
        them under the new path. Deleted: their checkpoints are put aside (``_put_aside``)."""
        action, path = data.get("action"), data.get("path")
        if not path or not (action == "delete" or (action == "rename" and data.get("source_path"))):
            return
        old = self._key(data["source_path"] if action == "rename" else path)
        try:
            stored = [s["key"] for s in await self.service.in_thread(self.service.store.sessions)]
        except CheckpointError as e:  # a store this server cannot open: the rename itself went through
            self.log.warning("jupyter-ckpt: the checkpoints under %s stay there: %s", old, e)
            return
        inside = os.path.join(old, "")
        live = {self._going_to(kernel_id, session) for kernel_id, session in self._sessions.items()}
        keys = {k for k in [*stored, *live] if k.startswith(inside)} | {old}
        if action == "delete":
            aside = f" (deleted {time.strftime('%Y-%m-%d %H:%M:%S')})"
            await self.service.in_thread(self._put_aside, sorted(keys.intersection(stored) - live), aside)
            return
        new = self._key(path)
        # At once: a kernel that runs a long cell holds up only its own notebook's move.
        await asyncio.gather(*(self._rename(key, new + key[len(old) :]) for key in sorted(keys)))

    def _key(self, path: str) -> str:
        """The session key of a notebook at ``path`` (relative to the server root), as jupyter_server names it in
        JPY_SESSION_NAME: from its folder as it is now (a folder renamed is a folder at its new path: the key of its
        path is not that folder's)."""
        folder = self.service.kernels.cwd_for_path(posixpath.dirname(path))  # type: ignore[no-untyped-call]
        return os.path.join(folder, posixpath.basename(path))

    def _put_aside(self, keys: list[str], aside: str) -> None:
        """Deleted notebooks' sessions go on under their key with ``aside`` after it (in a worker thread): a notebook
        made later at the same path (the next Untitled.ipynb) is another notebook, and was offered (with
        ``restore_on_start`` given, and after a crash restored) the deleted one's state. They stay in the store,
        where ``jupyter ckpt list`` and retention see them. A session a running kernel checkpoints into stays."""
        for key in keys:
            try:
                self.service.store.move_session(key, key + aside)
            except CheckpointError as e:
                self.log.warning("jupyter-ckpt: the checkpoints of deleted %s stay under its path: %s", key, e)
            else:
                self.log.info("jupyter-ckpt: notebook %s deleted: its checkpoints are kept as %s", key, key + aside)

    async def _rename(self, old: str, new: str) -> None:
        """Session ``old`` goes on as ``new``: in its running kernels, else (none, or none of them in it any more) in
        the store alone."""
        kernels = [k for k, s in self._sessions.items() if self._going_to(k, s) == old and k not in self._deaths]
        taken = await asyncio.gather(*(self._rename_in(kernel_id, old, new) for kernel_id in kernels))
        # None of them took it along: none ran (the kernel shut down), or each goes on in a session the user named.
        if not any(taken):
            try:
                await self.service.in_thread(self._follow_rename, "", old, new)
            except CheckpointError as e:
                self.log.warning("jupyter-ckpt: the checkpoints of %s stay there, not under %s: %s", old, new, e)

    def _going_to(self, kernel_id: str, session: str) -> str:
        """The session a kernel counted in ``session`` is in once the renames sent to it are done."""
        pending = self._renaming.get(kernel_id)
        return session if pending is None else pending[0]

    async def _rename_in(self, kernel_id: str, old: str, new: str) -> bool:
        """The kernel goes on in session ``new``, and the server counts it there once it said so; whether it did (not
        one in a session the user named, or that failed or died).

        A kernel running a cell is waited for as long as it runs: it takes the request once the cell ends. Meanwhile
        the notebook's next rename goes to it too, after this one: counted in the old session, it was left out, and
        the timeline moved without it. One that dies first is moved along by its crash recovery (``_recover``).
        """
        lock = self._renaming[kernel_id][1] if kernel_id in self._renaming else asyncio.Lock()
        self._renaming[kernel_id] = (new, lock)
        try:
            async with lock:
                if kernel_id in self.service.recovering:  # it died meanwhile: its crash recovery moves it along
                    return False
                async with self._connect(kernel_id, resume=True, timeout=math.inf) as kernel:
                    try:
                        self._sessions[kernel_id] = await kernel.call("rename", old=old, new=new)
                        return self._sessions[kernel_id] == new
                    except KernelDied:
                        raise
                    except CheckpointError as e:  # it may have moved all the same: where it is, it says
                        self._sessions[kernel_id] = await kernel.call("session")
                        self.log.warning("jupyter-ckpt: kernel %s: the rename of %s failed: %s", kernel_id, old, e)
        except CheckpointError as e:
            self.log.warning("jupyter-ckpt: kernel %s stays in session %s for now: %s", kernel_id, old, e)
        finally:
            if self._renaming.get(kernel_id, (None,))[0] == new:  # no later rename waits
                del self._renaming[kernel_id]
        return False

    def _died(self, kernel_id: str) -> None:
        """The restarter found the kernel process dead; whatever ran in it is lost."""
        self._deaths.add(kernel_id)
        self.service.recovering.add(kernel_id)
        if self.restore:  # called before the restarter starts the new kernel: it starts with this
            self._launch_env(kernel_id, "1")
        self._died_restoring(kernel_id)
        task = self._tasks.pop(kernel_id, None)
        if task is not None:
            task.cancel()

    def _launch_env(self, kernel_id: str, crash_restart: str) -> None:
        """Set ``CRASH_RESTART`` in the environment the kernel's next process starts with (jupyter_client 8.5 and
        later can; before, a kernel that loads the extension from its profile restores as it starts)."""
        update = getattr(self.service.kernels, "update_env", None)
        if update is not None:
            update(kernel_id=kernel_id, env={CRASH_RESTART: crash_restart})

    def _run(self, kernel_id: str, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks[kernel_id] = task

        def done(task: asyncio.Task[None]) -> None:
            if self._tasks.get(kernel_id) is task:
                del self._tasks[kernel_id]
                self.service.recovering.discard(kernel_id)
            if not task.cancelled() and task.exception() is not None:
                self.log.warning("jupyter-ckpt: kernel %s: %s", kernel_id, task.exception())

        task.add_done_callback(done)

    def _connect(self, kernel_id: str, *, resume: bool, timeout: float | None = None) -> KernelConnection:
        """A connection for the server's own request at a kernel's (re)start or its notebook's rename: sent at once,
        busy or not, answered within ``timeout`` seconds (default: ``kernel_timeout``)."""
        wait = self.service.kernel_timeout if timeout is None else timeout
        return KernelConnection(self.service.kernels, kernel_id, wait, idle=False, resume=resume)

    async def _load(self, kernel_id: str) -> None:
        # The notebook the server started the kernel on: its kernelspec may start it without that environment.
        launched = getattr(self.service.kernels.get_kernel(kernel_id), "_launch_args", None) or {}
        notebook = (launched.get("env") or {}).get("JPY_SESSION_NAME")
        async with self._connect(kernel_id, resume=True) as kernel:
            session = await kernel.call("catch_up", notebook=notebook)
        self._sessions[kernel_id] = session
        self.log.info("jupyter-ckpt: kernel %s checkpoints session %s", kernel_id, session)

    def _states(self, session: str, head: int | None) -> tuple[list[int], int]:
        """The good states of the crashed kernel's line of work in the session (``head``: its newest checkpoint),
        newest first, and the newest checkpoint of that line not made by a restore (read in a worker thread): what
        a cell of this kernel's left, not another kernel's on the same notebook."""
        line = lineage(self.service.timeline.checkpoints(session), head)
        return good_states(line), max((r.id for r in line if r.trigger not in ("restore", "crash-restore")), default=0)

    def _follow_rename(self, kernel_id: str, old: str, new: str) -> None:
        """The notebook was renamed (or moved) while its kernel ran, and that kernel died: what it checkpointed
        under the old path goes to the new one, where the restarted kernel is, unless the new path has a session
        of its own or another kernel still checkpoints under the old one (in a worker thread)."""
        store = self.service.store
        if any(k != kernel_id and s == old for k, s in self._sessions.items()):
            return
        try:
            if store.checkpoints(new):
                return
        except UnknownSession:
            pass
        try:
            store.move_session(old, new)
        except CheckpointError as e:
            self.log.warning("jupyter-ckpt: the checkpoints of %s stay there, not under %s: %s", old, new, e)
        else:
            self.log.info("jupyter-ckpt: notebook %s renamed %s: its checkpoints moved along", old, new)

    async def _recover(self, kernel_id: str) -> None:
        async with self._connect(kernel_id, resume=False) as kernel:
            crashed = await kernel.call("crashed")
            session: str = crashed["session"]
            before = self._sessions.get(kernel_id, session)
            if before != session and crashed["source"] == SERVER:  # the notebook was renamed
                await self.service.in_thread(self._follow_rename, kernel_id, before, session)
            self._sessions[kernel_id] = session
            try:
                states, newest = await self.service.in_thread(self._states, session, crashed["head"])
            except UnknownSession:
                message = "the kernel died before its first checkpoint: there was nothing to restore"
                self._publish("crash-restore-failed", session, kernel_id, None, [], message)
                return
            loop = self._loops.get(kernel_id)
            # A crash restore goes back to an older state: only a newer checkpoint is a cell completed since.
            if loop is None or newest > loop.newest:
                loop = self._loops[kernel_id] = CrashLoop(newest)
            if loop.stopped:  # said again at each death, so that the frontend is told of each
                tried = ", ".join(map(str, loop.tried)) or "none"
                message = (
                    f"the kernel died again; it was left empty, as restoring stopped after checkpoint(s) {tried}. "
                    "Restore a checkpoint yourself once you know what caused it."
                )
                self._publish("crash-restore-stopped", session, kernel_id, None, loop.tried, message)
                return
            untried = [s for s in states if s not in loop.tried]
            if not untried or len(loop.tried) >= MAX_TRIES:
                loop.stopped = True
                if loop.tried:
                    tried = ", ".join(map(str, loop.tried))
                    message = (
                        f"the kernel died again before a cell completed after restoring checkpoint(s) {tried}; "
                        "it was left empty. Restore a checkpoint yourself once you know what caused it."
                    )
                    self._publish("crash-restore-stopped", session, kernel_id, None, loop.tried, message)
                else:
                    message = "no checkpoint of this session finished without error; the kernel was left empty"
                    self._publish("crash-restore-failed", session, kernel_id, None, loop.tried, message)
                return
            target = untried[0]
            # Counted before the attempt: a state that kills the kernel while it loads is not tried twice.
            loop.tried.append(target)
            loop.restoring, loop.more = target, len(loop.tried) < MAX_TRIES and len(untried) > 1
            # Until its event is out, the restore is listed as running: a client never sees neither.
            restoring = {"session": session, "what": "restoring its last good state", "done": 0, "total": 0}
            self.service.restoring[kernel_id] = restoring
            try:
                await kernel.follow_progress(restoring.update)  # what the kernel's progress display says
                result = await kernel.call("restore", checkpoint=target, trigger="crash-restore")
            except KernelDied:
                self._died_restoring(kernel_id)
            except CheckpointError as e:
                self._publish("crash-restore-failed", session, kernel_id, target, loop.tried, str(e))
            else:
                self._publish(
                    "crash-restore",
                    session,
                    kernel_id,
                    target,
                    loop.tried,
                    result["summary"],
                    result["replayable"],
                    result["replay_cells"],
                )
            finally:
                loop.restoring = None
                self.service.restoring.pop(kernel_id, None)

    def _died_restoring(self, kernel_id: str) -> None:
        """Say so if the kernel died while a crash-restore loaded a checkpoint (once, whichever of the restarter
        and the restore's own request notices first): the state may be what kills it (a C extension that
        crashes as it loads), and it is not restored again."""
        loop = self._loops.get(kernel_id)
        restoring = self.service.restoring.pop(kernel_id, None)
        if loop is None or loop.restoring is None or restoring is None:
            return
        target, loop.restoring = loop.restoring, None
        message = f"the kernel died while checkpoint {target} was being restored; it is not restored again" + (
            ": the previous good checkpoint is tried next" if loop.more else ""
        )
        self._publish("crash-restore-failed", restoring["session"], kernel_id, target, loop.tried, message)

    def _publish(
        self,
        kind: str,
        session: str,
        kernel_id: str,
        checkpoint: int | None,
        tried: list[int],
        message: str,
        replayable: str = "",
        replay_cells: list[dict[str, Any]] | None = None,
    ) -> None:
        event = {
            "type": kind,
            "session": session,
            "path": self.service.api_path(session),
            "kernel_id": kernel_id,
            "checkpoint": checkpoint,
            "tried": list(tried),
            "time": time.time(),
            "message": message,
            "replayable": replayable,
            "replay_cells": replay_cells or [],
        }
        self.service.events.append(event)
        self.log.warning("jupyter-ckpt: %s of %s: %s", kind, session, message)
        self.bus.emit(schema_id=CRASH_EVENTS, data=event)

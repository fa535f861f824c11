"""The server's way into its kernels, and crash recovery.

``KernelConnection`` evaluates jupyter_ckpt calls in a live kernel the way a
frontend would not see: silent executions that record no cell and print
nothing, each one loading the IPython extension first if it is not loaded yet.

``CrashRecovery`` watches the kernel_actions event bus. jupyter_server's
restarter notices a dead kernel process and starts a new one; it calls the
``restart`` callbacks *before* the new process exists, so the callback only
notes the death, and the work happens on the ``restart`` success event that
follows, once the new kernel can answer. A restart the user asked for emits the
same event with no death before it: it only gets the extension loaded.
"""

from __future__ import annotations

import ast
import asyncio
import queue
import time
from collections import deque
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jupyter_client.session import new_id

from . import errors
from .errors import CheckpointError, UnknownSession
from .store import Store

if TYPE_CHECKING:
    from .server import CkptServerApp

KERNEL_ACTIONS = "https://events.jupyter.org/jupyter_server/kernel_actions/v1"
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
    },
}
# Silent code run before every call: load the extension (a no-op when it is loaded).
LOAD = "get_ipython().extension_manager.load_extension('jupyter_ckpt')"
# After a crash the server chooses the state to bring back, not the extension's restore_on_start.
LOAD_AFTER_CRASH = "get_ipython().config.Checkpoints.restore_on_start = False\n" + LOAD
# The kernel's Checkpointer, as an expression that leaves no name behind in the user's namespace.
ACTIVE = "__import__('jupyter_ckpt').extension.active()"


def restored(call: str) -> str:
    """An expression that runs a restore in the kernel and gives its summary and what it could replay."""
    return f"(lambda report: {{'summary': report.summary(), 'replayable': report.replayable}})({call})"


# Checkpoints the cells a frontend ran before the server's load request reached the kernel.
CATCH_UP = "__import__('jupyter_ckpt').extension.hooks().catch_up()"
# A session whose kernel keeps dying gets this many states restored, then none until a cell completes.
MAX_TRIES = 2
# Times a request the kernel aborted (a cell queued before it failed) is sent again.
ABORTED_RETRIES = 3
# Seconds a request waits for a busy kernel to go idle before it is refused.
IDLE_GRACE = 2.0


class UnknownKernel(CheckpointError):
    """A kernel id the server does not run."""

    http_status = 404


class KernelBusy(CheckpointError):
    """The kernel is running a cell; a request now would wait behind it."""

    http_status = 409


class KernelDied(CheckpointError):
    """The kernel died before it answered; the request was dropped, not kept for the kernel that replaces it."""

    http_status = 409


class KernelCallError(CheckpointError):
    """The kernel did not answer, or failed in a way that is not a checkpoint error."""

    http_status = 502


def _kernel_error(content: dict[str, Any]) -> CheckpointError:
    """The error a kernel reported, as the jupyter_ckpt error class it raised when it is one."""
    name, value = content.get("ename", "Error"), content.get("evalue", "")
    cls = getattr(errors, name, None)
    if isinstance(cls, type) and issubclass(cls, CheckpointError):
        return cls(value)
    return KernelCallError(f"the kernel raised {name}: {value}")


class KernelConnection:
    """A client on one live kernel, for ``async with``: ``await kernel.evaluate("...")``."""

    def __init__(self, app: CkptServerApp, kernel_id: str, *, idle: bool = True, load: str = LOAD) -> None:
        manager = app.serverapp.kernel_manager
        if kernel_id not in manager:
            raise UnknownKernel(f"no running kernel {kernel_id!r}")
        self.kernel_id = kernel_id
        if idle and app.recovery.recovering(kernel_id):
            raise KernelDied(
                f"kernel {kernel_id} died and is being brought back to its last good state; "
                "nothing was done. Try again once it is back."
            )
        self.manager = manager.get_kernel(kernel_id)
        self.idle = idle
        self.load = load
        self.timeout = app.kernel_timeout
        self.client: Any = None

    async def __aenter__(self) -> KernelConnection:
        if self.idle:
            await self._check_alive()
            await self._wait_until_idle()
        # Requests queue on the shell socket until the kernel listens, ahead of any a frontend sends later:
        # the server's own requests at a (re)start go out with no await before them.
        # A session of its own: the shell socket's identity is the session id, and two clients of one
        # kernel sharing it (crash recovery and a REST request) would get each other's replies.
        session = self.manager.session.clone()
        session.session = new_id()
        self.client = self.manager.client(session=session)
        self.client.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
        return self

    async def _wait_until_idle(self) -> None:
        """Refuse a kernel that runs a cell: a request would wait behind it and could outlive its caller.

        The server learns that the kernel went idle a moment after a reply, so a short busy spell is waited out.
        """
        deadline = time.monotonic() + IDLE_GRACE
        while self.manager.execution_state == "busy":
            if time.monotonic() > deadline:
                raise KernelBusy(f"kernel {self.kernel_id} is running a cell; try again when it is idle")
            await asyncio.sleep(0.05)

    async def __aexit__(self, *exc: object) -> None:
        self.client.stop_channels()

    async def _execute(self, expression: str) -> dict[str, Any]:
        """The reply's content to one silent request.

        The request is sent before any await, so at a kernel's (re)start it is
        ahead of the cells a frontend sends. A kernel that dies meanwhile ends the
        wait at once. The request must not wait in the socket for the restarted
        kernel either, where it would run before the crash recovery:
        ``__aexit__`` closes the socket, dropping it.
        """
        msg_id = self.client.execute(  # not stop_on_error: a failure here must never abort the user's cells
            self.load, silent=True, user_expressions={"value": expression}, stop_on_error=False
        )
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                reply = await self.client.get_shell_msg(timeout=0.1)
            except queue.Empty:
                await self._check_alive()
                if time.monotonic() > deadline:
                    raise KernelCallError(f"the kernel did not answer within {self.timeout:g} s") from None
                continue
            if reply["parent_header"].get("msg_id") == msg_id:
                return dict(reply["content"])

    async def _check_alive(self) -> None:
        if not await self.manager.is_alive():
            raise KernelDied(
                f"kernel {self.kernel_id} died; nothing was done. Try again once it has restarted "
                "(after its crash recovery, if that is on)."
            )

    async def evaluate(self, expression: str) -> Any:
        """The value of a Python expression in the kernel, whose repr must be a literal.

        A request that the kernel aborted, because a cell before it failed, did not run: it is sent again.
        """
        for _ in range(ABORTED_RETRIES):
            content = await self._execute(expression)
            if content["status"] != "aborted":
                break
        else:
            raise KernelCallError("the kernel skipped the request each time: the cells before it kept failing")
        if content["status"] != "ok":
            raise _kernel_error(content)
        result = content["user_expressions"]["value"]
        if result["status"] != "ok":
            raise _kernel_error(result)
        return ast.literal_eval(result["data"]["text/plain"])


def good_states(store: Store, session: str) -> list[int]:
    """The session's distinct states that finished without error, newest first.

    A restore entry holds the state of the checkpoint it restored, so it counts
    as that checkpoint: restoring either brings back the same variables.
    """
    records = store.checkpoints(session)
    by_id = {r.id: r for r in records}
    states: list[int] = []
    for r in reversed(records):
        if r.status != "ok":
            continue
        while r.trigger in ("restore", "crash-restore") and r.parent in by_id:
            r = by_id[r.parent]
        if r.id not in states:
            states.append(r.id)
    return states


@dataclass
class CrashLoop:
    """The crash-restores of one kernel since a cell of its session last completed."""

    newest_cell: int | None
    tried: list[int] = field(default_factory=list)
    stopped: bool = False


class CrashRecovery:
    """Loads the extension into new kernels, and restores crashed ones to their last good state."""

    def __init__(self, app: CkptServerApp) -> None:
        self.app = app
        self.events: deque[dict[str, Any]] = deque(maxlen=1000)
        self._deaths: set[str] = set()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._loops: dict[str, CrashLoop] = {}
        self._recovering: set[str] = set()  # restarted after a crash, the state not brought back yet

    def recovering(self, kernel_id: str) -> bool:
        """Whether the kernel died and its crash recovery has not finished: a request now would run before it."""
        return kernel_id in self._deaths or kernel_id in self._recovering

    def start(self) -> None:
        bus = self.app.serverapp.event_logger
        bus.register_event_schema(CRASH_SCHEMA)
        bus.add_listener(schema_id=KERNEL_ACTIONS, listener=self._on_kernel_action)

    async def stop(self) -> None:
        self.app.serverapp.event_logger.remove_listener(schema_id=KERNEL_ACTIONS, listener=self._on_kernel_action)
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
            self._recovering.discard(kernel_id)
            self._loops.pop(kernel_id, None)
            return
        manager = self.app.serverapp.kernel_manager
        if action == "start":
            manager.add_restart_callback(kernel_id, lambda: self._died(kernel_id), "restart")
        if action not in ("start", "restart") or manager.get_kernel(kernel_id).kernel_spec.language != "python":
            return
        crashed = action == "restart" and kernel_id in self._deaths
        self._deaths.discard(kernel_id)
        if crashed and self.app.auto_restore_on_crash:
            self._recovering.add(kernel_id)
            self._run(kernel_id, self._recover(kernel_id))
        elif self.app.autoload:
            self._run(kernel_id, self._load(kernel_id))

    def _died(self, kernel_id: str) -> None:
        """The restarter found the kernel process dead; whatever ran in it is lost."""
        self._deaths.add(kernel_id)
        task = self._tasks.pop(kernel_id, None)
        if task is not None:
            task.cancel()

    def _run(self, kernel_id: str, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks[kernel_id] = task

        def done(task: asyncio.Task[None]) -> None:
            if self._tasks.get(kernel_id) is task:
                del self._tasks[kernel_id]
                self._recovering.discard(kernel_id)
            if not task.cancelled() and task.exception() is not None:
                self.app.log.warning("jupyter-ckpt: kernel %s: %s", kernel_id, task.exception())

        task.add_done_callback(done)

    async def _load(self, kernel_id: str) -> None:
        async with KernelConnection(self.app, kernel_id, idle=False) as kernel:
            session = await kernel.evaluate(f"({CATCH_UP}, {ACTIVE}.session)[1]")
        self.app.log.info("jupyter-ckpt: kernel %s checkpoints session %s", kernel_id, session)

    async def _recover(self, kernel_id: str) -> None:
        async with KernelConnection(self.app, kernel_id, idle=False, load=LOAD_AFTER_CRASH) as kernel:
            session: str = await kernel.evaluate(f"{ACTIVE}.session")
            try:
                states = good_states(self.app.store, session)
            except UnknownSession:
                return  # it died before its first checkpoint: nothing to bring back
            newest_cell = self.app.store.newest_cell(session)
            loop = self._loops.get(kernel_id)
            if loop is None or loop.newest_cell != newest_cell:
                loop = self._loops[kernel_id] = CrashLoop(newest_cell)
            if loop.stopped:
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
            try:
                result = await kernel.evaluate(restored(f"{ACTIVE}.restore({target}, trigger='crash-restore')"))
            except CheckpointError as e:
                self._publish("crash-restore-failed", session, kernel_id, target, loop.tried, str(e))
                return
        self._publish("crash-restore", session, kernel_id, target, loop.tried, result["summary"], result["replayable"])

    def _publish(
        self,
        kind: str,
        session: str,
        kernel_id: str,
        checkpoint: int | None,
        tried: list[int],
        message: str,
        replayable: str = "",
    ) -> None:
        event = {
            "type": kind,
            "session": session,
            "path": self.app.api_path(session),
            "kernel_id": kernel_id,
            "checkpoint": checkpoint,
            "tried": list(tried),
            "time": time.time(),
            "message": message,
            "replayable": replayable,
        }
        self.events.append(event)
        self.app.log.warning("jupyter-ckpt: %s of %s: %s", kind, session, message)
        self.app.serverapp.event_logger.emit(schema_id=CRASH_EVENTS, data=event)

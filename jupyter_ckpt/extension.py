"""The IPython extension: the session, and the cell hooks.

``%load_ext jupyter_ckpt`` calls ``load_ipython_extension``, which builds one
``Checkpointer`` for the kernel and registers the ``%checkpoint`` magics, the
``Checkpoints`` options (``%config Checkpoints``) and the ``pre_run_cell`` /
``post_run_cell`` hooks that drive automatic checkpoints and follow the
notebook's name (``session.py``) when a frontend gives it after start-up.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import re
import secrets
import sys
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from IPython.core.getipython import get_ipython
from IPython.core.interactiveshell import InteractiveShell
from traitlets import TraitError

from . import shellconfig, shellhooks
from .blobs import RESTORING
from .cellcode import only_checkpoint_magics
from .checkpointer import Checkpointer, Policy
from .config import CRASH_RESTART, Checkpoints, open_replica
from .errors import BadArgument, CheckpointError, reading_store
from .format import previous_session_line
from .notice import Notice
from .processes import owner, owner_alive
from .progress import PROGRESS_MIME
from .schedule import Scheduler
from .session import OWN, SERVER, TYPED, KernelRecord, SessionKey, keep_record, kept_record, session_key, session_name
from .units import human_bytes

# The shell attribute holding the extension's CellHooks, and through them its Checkpointer.
_ON_SHELL = "jupyter_ckpt_hooks"


def kernel_key() -> str:
    """A key for this kernel alone: the session of a kernel whose notebook nobody names.

    Its connection file's name where that is unique (a server names it by a UUID); a process id is not, alone
    (``jupyter console`` and ipykernel name the file after it, and a container's first process is always 1),
    so it gets a random part.
    """
    try:
        from ipykernel.connect import get_connection_file

        name = Path(get_connection_file()).stem.removeprefix("kernel-")
        prefix = "kernel"
    except Exception:  # not an ipykernel (terminal IPython): the process
        name, prefix = str(os.getpid()), "ipython"
    return f"{prefix}-{name}-{secrets.token_hex(4)}" if name.isdigit() else f"{prefix}-{name}"


class ProgressLine:
    """One restore's progress as a display in the output of what runs it, shown once it has run ``after``
    seconds and updated in place: "restoring kernel checkpoint #3: 1.2 GiB of 4.0 GiB"."""

    def __init__(self, what: str, after: float) -> None:
        self._what = what
        self._after = after
        self._start = time.monotonic()
        self._shown = 0.0
        self._handle: Any = None

    def __call__(self, done: int, total: int) -> None:
        from IPython.display import display

        now = time.monotonic()
        finished = done >= total
        if self._handle is None and now - self._start < self._after:
            return  # quick ones show nothing
        if self._handle is not None and not finished and now - self._shown < 0.25:
            return
        self._shown = now
        bundle = {
            "text/plain": f"{self._what}: {human_bytes(done)} of {human_bytes(total)}",
            PROGRESS_MIME: {"what": self._what, "done": done, "total": total},
        }
        if self._handle is None:
            self._handle = display(bundle, raw=True, display_id=True)  # type: ignore[no-untyped-call]  # IPython is unannotated
        else:
            self._handle.update(bundle, raw=True)


class CellHooks:
    """Ties a Checkpointer to one shell's cells, and to the notebook's session as the frontend names it."""

    def __init__(
        self,
        shell: InteractiveShell,
        ckpt: Checkpointer,
        config: Checkpoints,
        notices: list[str],
        session: SessionKey,
        own: str,
    ) -> None:
        self.shell = shell
        self.ckpt = ckpt
        self.config = config
        self.session = session  # the Checkpointer's session key, and how it was chosen
        self._own = own  # the key of this kernel alone, for when nothing names the notebook
        self._refused = Notice(self.notice)  # why the kernel could not move to the session named
        # Set by a restore: the cell's state is on the timeline already.
        self.skip_cell = False
        self._started = 0.0
        self._executing = False
        self._stop = threading.Event()
        self._notices = notices  # what the Checkpointer reported since the last cell boundary
        self._timer: threading.Thread | None = None
        self._cell_ended = threading.Event()
        self._idle_failing = Notice(self.notice)  # why the idle thread's work fails, said once until it works
        # Whether to say, at the first cell boundary once a remote store's timeline is pulled, what the
        # notebook's earlier kernels left: format.previous_session_line.
        self.greet = False
        # Variables a restore at start-up made: IPython hides whatever the namespace holds once its extensions
        # are loaded (``init_code``), so they are shown again, and checkpointed meanwhile, as the user's.
        self._restored: set[str] = set()
        self._shut = False
        # Back in the session of the kernel it replaced after a crash, which nothing names in this one yet.
        self._after_crash = False

    def hidden(self) -> set[str]:
        """The names no checkpoint holds: IPython's own (``user_ns_hidden``), not those a restore made."""
        return self.shell.user_ns_hidden.keys() - self._restored

    def pre_run_cell(self, info: Any) -> None:
        if self._restored:  # restored at start-up: said, and the user's from the first cell (``%who``)
            for name in self._restored:
                self.shell.user_ns_hidden.pop(name, None)
            self._restored = set()
            self.flush_notices()
        with self.ckpt._lock:  # an idle checkpoint in progress finishes before the cell starts
            try:
                self.follow_notebook()
                if not only_checkpoint_magics(info.raw_cell or ""):  # those settle what is owed themselves
                    self.ckpt.before_cell()  # the last cell's state, if it is owed and the budget allows
            except Exception as e:  # never let a checkpoint keep the user's cell from running
                self.notice(f"jupyter-ckpt: checkpoint failed: {type(e).__name__}: {e}")
            self._executing = True
        self._started = time.perf_counter()

    def post_run_cell(self, result: Any) -> None:
        self._executing = False
        duration = time.perf_counter() - self._started if self._started else 0.0
        source = result.info.raw_cell or ""
        # No checkpoint for: a cell that restored (its state is on the timeline already); a cell of
        # %checkpoint lines only (it changed no variable); the cell that loaded the extension (no
        # pre_run_cell seen) if the namespace holds no variable, so an empty new kernel never becomes "latest"
        # before the last one's work. One holding variables (made in that cell or before it) is owed its
        # checkpoint as any cell's: ``wait()`` in the next makes it durable.
        loading = not self._started
        skip = self.skip_cell or only_checkpoint_magics(source) or (loading and not self.ckpt.holds_variables())
        self.skip_cell = False
        try:
            self.follow_notebook()  # the cell is recorded in the notebook's session, if it just got one
            if skip:
                self.ckpt.record_cell(result.execution_count, source, result.success, duration)
            else:
                self.ckpt.after_cell(result.execution_count, source, result.success, duration)
        except CheckpointError as e:
            notify(f"jupyter-ckpt: checkpoint failed: {e}")
        except Exception as e:  # never let a checkpoint break the user's cell
            notify(f"jupyter-ckpt: checkpoint failed: {type(e).__name__}: {e}")
        self._cell_ended.set()
        replica = self.ckpt.replica
        if self.greet and (replica is None or replica.pulled.is_set()):  # else once the remote timeline is in
            self.greet = False
            if not self.ckpt.restored:  # a crash restore has brought it back already
                with contextlib.suppress(CheckpointError):  # the line is a courtesy: never an error in a cell
                    if (offer := self.ckpt.resume_offer()) is not None:
                        notify(previous_session_line(offer))
        self.flush_notices()

    def follow_notebook(self) -> None:
        """At a cell boundary: move to the session the frontend names now, if that is not the kernel's.

        VS Code names the notebook (``__vsc_ipynb_file__``) by code it runs after
        start-up, and ``%config Checkpoints.session`` can name it in a running
        kernel. A name typed with ``%checkpoint session`` stays whatever they say.
        """
        if self.session.source == TYPED:
            return
        try:
            key = session_key(self.shell.user_ns, self.config.session, self._own)
            if key.source == OWN and self._after_crash:  # nothing names the notebook again yet
                return
            self.move(key)
        except CheckpointError as e:  # a session option no notebook could have, a tag in both sessions
            self._refused.tell(f"jupyter-ckpt: checkpoints stay in session {self.ckpt.session!r}: {e}", str(e))

    def started_on(self, notebook: str) -> None:
        """The server started this kernel on ``notebook`` (its JPY_SESSION_NAME): if the kernel's environment lost it
        on the way (a kernelspec that starts the kernel through ``env -i``, a container, a login shell), the kernel
        is as if started with it, and goes on in that notebook's session."""
        if os.environ.get("JPY_SESSION_NAME") is None:
            self.ckpt.start_with("JPY_SESSION_NAME", notebook)
            self.follow_notebook()

    def name_session(self, name: str) -> SessionKey:
        """``%checkpoint session NAME``: go on in that session, whatever a frontend names, from now on."""
        self.move(SessionKey(session_name(name), TYPED))
        return self.session

    def move(self, key: SessionKey) -> None:
        """Go on in session ``key`` and offer what its earlier kernels left. What this kernel recorded in a
        session of its own goes along; a named session it leaves keeps its history."""
        if key.key != self.ckpt.session:
            self.go_to(key, take_along=self.session.source == OWN)
            self.arrive()
        self.session = key

    def go_to(self, key: SessionKey, *, take_along: bool) -> None:
        """Checkpoint into session ``key`` from now on (``Checkpointer.move_to``), and know it by that key.

        The Checkpointer goes on in the new session before it adopts what killed kernels' writers left there, which
        can fail (a store file it cannot read): the kernel is in the new session all the same, and its key says so,
        else its next cell would go back to the old one, away from the checkpoints that moved.
        """
        try:
            self.ckpt.move_to(key.key, take_along=take_along)
        finally:
            if self.ckpt.session == key.key:
                self.session = key
                if key.source == SERVER:  # the server renamed the notebook: the kernel is as if started on the new path
                    # Not a change the cells made: no checkpoint shows it, and a restore to a state from before the
                    # rename keeps it (with the old path back, the next cell would go back to the old session).
                    self.ckpt.start_with("JPY_SESSION_NAME", key.key)
                self.remember()

    def remember(self) -> None:
        """Keep in the store where this kernel checkpoints and its newest checkpoint, for the kernel the server
        starts in its place if it crashes (``back_after_crash``)."""
        record = KernelRecord(self.ckpt.session, self.session.source, self.ckpt.head)
        keep_record(self.ckpt.store.root, self._own, record, self.ckpt.store.seal)

    def back_after_crash(self) -> int | None:
        """This kernel replaces one that crashed (the server restarted it, under the same key): go back to the
        session the user had named in it, which no frontend names again. The crashed kernel's newest checkpoint, if
        it left one: its own work, whatever other kernels on the notebook did since."""
        record = kept_record(self.ckpt.store.root, self._own, self.ckpt.store.unseal)
        if record is None:
            return None
        # Named by the user, or by a frontend that has not named it again yet (VS Code on a server names the
        # notebook by code it runs after start-up): until a frontend names another, the crashed kernel's session.
        unnamed = self.session.source == OWN and record.source != OWN
        if record.session != self.ckpt.session and (record.source == TYPED or unnamed):
            self.go_to(SessionKey(record.session, record.source), take_along=False)
            self._after_crash = True
        return record.head

    def arrive(self, *, resume: bool = True) -> None:
        """The kernel is in its notebook's session: restore the last good state the notebook's earlier kernels
        left if ``restore_on_start`` asks for it, ``resume`` allows it and this kernel has done nothing yet, else say
        at the next cell boundary what they left."""
        if resume and self.config.restore_on_start and self.ckpt.nothing_done() and self.ckpt.checkpoints():
            # Said at the next cell boundary: at start-up nothing shows what is printed now.
            died = self._died_restoring()
            if died is not None:
                self.notice(
                    f"jupyter-ckpt: the last kernel on this notebook died while it restored checkpoint {died} as it "
                    "started; nothing was restored, as that state may be what kills the kernel. Choose what to bring "
                    "back: %checkpoint list, then %checkpoint restore REF"
                )
                self.greet = False  # whose "restore previous" would bring that state back
                return
            before = set(self.shell.user_ns)
            try:
                target = self.ckpt.resolve("last-good")
                number = self.ckpt.timeline.number(self.ckpt.session, target.id)
                with self._restoring(f"#{number} (id {target.id})"):
                    self.notice("jupyter-ckpt: " + self.ckpt.restore(target.id).summary())
            except CheckpointError as e:
                self.notice(f"jupyter-ckpt: could not restore the last good checkpoint: {e}")
            self._restored = set(self.shell.user_ns) - before
        else:
            # Loaded by the server, the extension prints nowhere a user looks: the line waits for the first cell.
            self.greet = True

    def _marker(self, pid: str) -> Path:
        """The file that says kernel ``pid`` (its ``processes.owner``) is restoring its notebook's last good state as it
        starts."""
        digest = hashlib.sha256(self.ckpt.session.encode()).hexdigest()[:16]
        return self.ckpt.store.blobs.tmp / f"{RESTORING}{pid}.{digest}"

    @contextlib.contextmanager
    def _restoring(self, checkpoint: str) -> Iterator[None]:
        """While a restore at start-up runs, its marker says which checkpoint it restores: a kernel the state kills
        as it loads leaves the marker behind for the next one (``_died_restoring``). A store that will not take it
        takes nothing from the restore."""
        marker = self._marker(owner())
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW  # made anew: a link planted there is not followed
        with contextlib.suppress(OSError):
            marker.unlink(missing_ok=True)
        with contextlib.suppress(OSError), open(os.open(marker, flags, 0o600), "w") as f:
            f.write(checkpoint)  # private, as every file of the store
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                marker.unlink()

    def _died_restoring(self) -> str | None:
        """The checkpoint an earlier kernel on this session was restoring as it started when it died, if one did
        (its marker is left, its process gone), so that the state that may have killed it is not restored again and
        again: by a kernel started outside the server after each death (VS Code, the terminal), which no crash
        recovery watches. The markers are removed: the restart after this one restores again."""
        died = None
        for marker in self._marker("*").parent.glob(self._marker("*").name):
            pid = marker.name.split(".")[1]
            if pid != owner() and owner_alive(marker.name):  # a kernel restoring now
                continue
            # Read as _restoring writes it, never through a link: a file planted there (a link to a key) is not shown.
            with contextlib.suppress(OSError, UnicodeDecodeError):
                with open(os.open(marker, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
                    text = f.read(64).decode()
                died = text if re.fullmatch(r"#\w+ \(id \d+\)", text) else died
            with contextlib.suppress(OSError):
                marker.unlink()
        return died

    def catch_up(self) -> None:
        """Record the cells that ran before the extension was loaded, and checkpoint after the last of them.

        The server loads the extension through a kernel client of its own, whose
        request can reach a new kernel just after a frontend's first cell.
        IPython keeps no cell's status (and this silent request reset the last
        one): they are recorded as ``ok``.
        """
        ran = self.shell.user_ns.get("In", [])[1 : self.shell.execution_count]
        if not ran or self.ckpt.last_cell is not None:
            return
        for count, source in enumerate(ran[:-1], start=1):
            self.ckpt.record_cell(count, source, True, 0.0)
        self.ckpt.after_cell(len(ran), ran[-1], True, 0.0)
        self.flush_notices()

    def notice(self, message: str) -> None:
        self._notices.append(message)

    def flush_notices(self) -> None:
        """Print what the Checkpointer reported, from the kernel's own thread at a cell boundary.

        A background write finishes at any time, often in the idle thread; printed
        here, its message lands in a cell's output and nowhere else.
        """
        while self._notices:
            notify(self._notices.pop(0))

    def start_idle_timer(self) -> None:
        if self._timer is None:
            self._timer = threading.Thread(target=self._idle_loop, name="jupyter-ckpt-idle", daemon=True)
            self._timer.start()

    def _idle_loop(self) -> None:
        while not self._stop.is_set():
            if self._cell_ended.wait(self.config.idle_poll):  # a cell just ended: look again once its grace is over
                self._cell_ended.clear()
                self._stop.wait(self.ckpt.schedule.grace)
            try:
                with self.ckpt._lock:
                    if self._executing:  # mid-cell, the namespace is in flux: only commit what is written
                        self.ckpt.commit_finished()
                    else:
                        self.ckpt.idle_tick()
                # Without the lock, which it takes a slice at a time; it stops when a cell starts.
                self.ckpt.make_writable_again(idle=lambda: not self._executing)
            except Exception as e:  # the kernel must outlive any failed periodic checkpoint; said once a reason
                self._idle_failing.tell(f"jupyter-ckpt: periodic checkpoint failed: {e}", reason=str(e))
            else:
                self._idle_failing.clear()

    def shut_down(self) -> None:
        """The kernel or the terminal exits: make what the cells left durable while the namespace still holds
        it, once, and take no checkpoint after (the shell empties the namespace next).

        A kernel asked to shut down while a cell runs (ipykernel answers on a thread of its own) only finishes
        the writes in flight: the namespace is in flux, and the state the last cell left is gone already.
        """
        if self._shut:
            return
        self._shut = True
        self._stop.set()
        try:
            with self.ckpt._lock:  # a cell starts only after this (``pre_run_cell``)
                self.ckpt.wait(take_owed=not self._executing)
        except Exception as e:  # at exit: said, never raised into the shell's own clean-up
            notify(f"jupyter-ckpt: the last cells' state could not be made durable: {e}")

    def close(self) -> None:
        self._stop.set()
        self.shell.events.unregister("pre_run_cell", self.pre_run_cell)
        self.shell.events.unregister("post_run_cell", self.post_run_cell)


def notify(message: str) -> None:
    print(message, file=sys.__stderr__ if sys.stderr is None else sys.stderr, flush=True)


def hooks(shell: InteractiveShell | None = None) -> CellHooks | None:
    """The extension's hooks on ``shell`` (default: the running one), holding its Checkpointer; None if not loaded."""
    return getattr(shell or get_ipython(), _ON_SHELL, None)


def active(shell: InteractiveShell | None = None) -> Checkpointer:
    """The Checkpointer of ``shell`` (default: the running one) for the Python API, loading the extension first if
    it is not, as ``%load_ext`` and the server's requests do: ``import jupyter_ckpt; jupyter_ckpt.save()`` works in
    any kernel."""
    shell = shell or get_ipython()
    if shell is None:
        raise CheckpointError("jupyter-ckpt checkpoints an IPython kernel, and none is running here")
    if hooks(shell) is None and shell.extension_manager is not None:
        shell.extension_manager.load_extension("jupyter_ckpt")  # a store it cannot use raises its one-line error
    found = hooks(shell)
    if found is None:
        raise CheckpointError("jupyter-ckpt is not loaded in this kernel: run %load_ext jupyter_ckpt first")
    return found.ckpt


def load(shell: InteractiveShell) -> None:
    if hooks(shell) is not None:
        return
    from .magics import CheckpointMagics

    try:
        config = Checkpoints(parent=shell)
    except TraitError as e:  # a value the option cannot take, in a configuration file: one line, as %config says it
        raise BadArgument(str(e)) from None
    own = kernel_key()
    session = session_key(shell.user_ns, config.session, own)
    store = config.open_store()
    default = Policy(auto=config.auto, every=config.every or None, interval=config.interval or None)
    notices: list[str] = []
    try:
        replica = open_replica(store, config.store_url, notices.append)
    except CheckpointError as e:  # no client for the URL: local checkpoints go on, and the user is told
        notify(f"jupyter-ckpt: {e}; checkpoints are kept locally only")
        replica = None
    with reading_store(store.root):  # it adopts the results killed kernels' writers left in the store
        ckpt = Checkpointer(
            store,
            session.key,
            shell.user_module,
            hidden=lambda: cell_hooks.hidden(),
            notify=notices.append,
            policy=default,
            background=config.background,
            lazy=config.lazy_restore,
            replay_mode=config.replay,
            scheduler=Scheduler(budget=config.budget, max_lag=config.max_lag),
            run_cell=lambda source, namespace: exec(
                compile(shell.transform_cell(source), "<replay>", "exec"),  # type: ignore[no-untyped-call]  # IPython is unannotated
                namespace,
            ),
            configure=lambda lines, cells: {**shellconfig.apply(shell, lines), **shellhooks.apply(shell, cells)},
            replica=replica,
            progress=lambda what: ProgressLine(what, config.progress_after),
            limits=config.limits(),
            on_head=lambda: cell_hooks.remember(),
        )
    cell_hooks = CellHooks(shell, ckpt, config, notices, session, own)
    setattr(shell, _ON_SHELL, cell_hooks)
    magics = CheckpointMagics(shell, hooks=cell_hooks)
    shell.register_magics(magics)
    shell.magics_manager.register_function(magics.checkpoint, "line", "ckpt")  # the same magic: ``%ckpt?`` is its help
    follow_options(config, ckpt)
    # %config Checkpoints lists the options, and sets them. (IPython infers the list's type from its first item.)
    shell.configurables.append(config)  # type: ignore[arg-type]
    shell.events.register("pre_run_cell", cell_hooks.pre_run_cell)
    shell.events.register("post_run_cell", cell_hooks.post_run_cell)
    cell_hooks.start_idle_timer()  # owed checkpoints are taken when idle, whatever the writer
    atexit.register(cell_hooks.shut_down)  # a clean shutdown commits the write in flight
    # The terminal's loop empties the namespace as it ends, before ``atexit`` runs (``_atexit_once``, once).
    empty_namespace = shell._atexit_once

    def settle_then_empty() -> None:
        cell_hooks.shut_down()
        empty_namespace()  # type: ignore[no-untyped-call]  # IPython is unannotated

    shell._atexit_once = settle_then_empty  # type: ignore[method-assign]
    # A kernel asked to shut down (nbclient, papermill, "Shut Down Kernel", a restart) terminates every process
    # of its group, a writer mid-write among them, before ``atexit``: the writes are finished first.
    kernel = getattr(shell, "kernel", None)
    if kernel is not None:
        shut_down_kernel = kernel.do_shutdown

        def settle_then_shut_down(restart: bool) -> Any:
            cell_hooks.shut_down()
            return shut_down_kernel(restart)

        kernel.do_shutdown = settle_then_shut_down
    cell_hooks.arrive(resume=not os.environ.get(CRASH_RESTART))  # after a crash, the server chooses the state


def starting_up() -> bool:
    """Whether IPython is loading the extensions its configuration names (the kernel starting, from the profile
    ``jupyter ckpt enable`` wrote), not running ``%load_ext`` in a cell."""
    frame: types.FrameType | None = sys._getframe()
    while frame is not None and frame.f_code.co_name != "init_extensions":
        frame = frame.f_back
    return frame is not None


def refused_at_start(shell: InteractiveShell, error: CheckpointError) -> None:
    """The extension cannot load as the kernel starts (a damaged or unsafe store, a missing secret). IPython would
    print a traceback to the kernel's log, where nobody looks: the reason is said in one line there and in the
    first cell instead, ``%checkpoint`` says it too, and ``%load_ext jupyter_ckpt`` tries again once it is fixed."""
    from IPython.core.error import UsageError

    line = f"jupyter-ckpt is not loaded: {error}"
    notify(line)

    def first_cell(info: Any) -> None:
        shell.events.unregister("pre_run_cell", first_cell)
        shell.extension_manager.loaded.discard("jupyter_ckpt")  # type: ignore[union-attr]  # added once this returned
        notify(line)

    def checkpoint(arguments: str) -> None:
        raise UsageError(f"{line.rstrip('.')}; once that is fixed: %load_ext jupyter_ckpt")

    shell.events.register("pre_run_cell", first_cell)
    shell.register_magic_function(checkpoint, "line", "checkpoint")  # type: ignore[arg-type]  # IPython's decorator hides its signature


def follow_options(config: Checkpoints, ckpt: Checkpointer) -> None:
    """Make the options a running kernel can change (``%config Checkpoints.replay = 'never'``) take effect at once.

    ``idle_poll``, ``progress_after``, ``session`` and ``restore_on_start`` are read where they are used; the
    store, the writer and retention are set up at load (new kernels); ``auto``, ``every`` and ``interval`` are
    the policy of new sessions.
    """

    def apply(change: Any) -> None:
        ckpt.replay_mode = config.replay
        ckpt.lazy = config.lazy_restore
        ckpt.schedule.budget = config.budget
        ckpt.schedule.max_lag = config.max_lag

    config.observe(apply, names=["replay", "lazy_restore", "budget", "max_lag"])


def unload(shell: InteractiveShell) -> None:
    cell_hooks = hooks(shell)
    if cell_hooks is not None:
        cell_hooks.close()
        if cell_hooks.ckpt.replica is not None:
            cell_hooks.ckpt.replica.stop()  # what is not uploaded yet goes with the next kernel on this store
        delattr(shell, _ON_SHELL)
        vars(shell).pop("_atexit_once", None)  # the shell's own again, and the kernel's
        if (kernel := getattr(shell, "kernel", None)) is not None:
            vars(kernel).pop("do_shutdown", None)
        for name in ("checkpoint", "ckpt"):  # the magics hold the hooks: they go with them
            shell.magics_manager.magics["line"].pop(name, None)
        shell.configurables.remove(cell_hooks.config)  # type: ignore[arg-type]  # as in load

"""The front door: one object per kernel that every surface talks to.

The magics, the Python API, the widget and the server's kernel-side code call
``Checkpointer`` methods and nothing below it. It knows nothing of Jupyter: the
IPython extension hands it the user's module, the names to hide, and the
session key.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import math
import os
import re
import threading
import time
import types
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypedDict

from . import attributes, capture, environment, loggers, memory, paths, serialize, settings, shellconfig, warnfilters
from .blobs import BlobInfo
from .cellcode import only_checkpoint_magics
from .errors import (
    BadArgument,
    CheckpointError,
    CheckpointFailed,
    IntegrityError,
    StoreFullError,
    StoreReadOnly,
    UnknownCheckpoint,
    naming,
)
from .manifest import Manifest, Skipped, new_uid
from .notice import Notice
from .progress import Progress, untold
from .recipes import Recipe, RunCell, check_mode, exec_cell, plan, run_recipe
from .remote import Replica
from .restore import Diff, RestoreReport, diff_manifests, restore_namespace, set_process_states
from .retention import Limits, Retention, usage
from .schedule import Scheduler
from .session import check_text
from .store import DAMAGED_POLICY, NEW_KERNEL, Cell, CheckpointRecord, Store, check_tag
from .timeline import Thinned, Timeline, steps_back
from .units import human_bytes
from .writer import (
    RESULT,
    ForkWriter,
    SyncWriter,
    WriterStopped,
    adopt,
    fork_unsafe_reason,
    resident_bytes,
    result_blobs,
    system_seconds,
)
from .writewatch import HUGE, Seen, WriteWatch, observed

TRIGGERS = ("cell", "interval", "manual", "loop", "restore", "crash-restore")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Bytes of the kernel's memory a checkpoint is assumed to cost a second of (the fork, the pages copied while
# the writer runs, the writer's CPU), until the kernel's first checkpoint is measured.
PRIOR_RATE = 1 << 30
# What a writer hands back to commit: the manifest, its blobs, and the buffers it hashed (``WriteWatch.learn``).
Written = tuple[Manifest, dict[str, BlobInfo], list[Seen]]
# Bytes of pages made writable again (and merged into a huge page) at a time, during which a fork waits:
# one huge page, 0.7-3 ms.
WRITABLE_SLICE = HUGE
# The reason of what a store on a read-only disk makes fail (a cell's record, a save, a restore's entry): said once.
READ_ONLY = "read-only"
PULL_WAIT = 60.0  # seconds a look at the timeline waits for the remote one to be pulled at kernel start

# The libraries whose arrays, frames and tensors a checkpoint writes from their own memory, not pickled whole.
_BUFFERED = ("numpy", "pandas", "torch")


def no_progress(what: str) -> Progress:
    """A save's or restore's progress, told to nobody."""
    return untold


class Status(TypedDict):
    """Where things stand, as ``%checkpoint status`` shows it."""

    store: str
    session: str
    policy: dict[str, Any]  # the session's Policy
    checkpoints: int
    bytes: int  # stored by this session's checkpoints
    last_checkpoint_age: float | None  # seconds
    writing: bool  # a background write is in progress
    skipped: dict[str, str]  # variables the last checkpoint could not hold, and why
    schedule: dict[str, Any]  # Scheduler.report(): how far behind, the overhead, cells skipped and why
    remote: dict[str, Any] | None  # Replica.status(), with a remote store
    usage: dict[str, int | str]  # retention.Usage: size against the budget, free space against the floor
    retention_error: str | None
    writer_stopped: str | None  # why a writer was last stopped for memory
    no_room: str | None  # the newest state taken, whose save found the store full, and the store's error


@dataclass
class Policy:
    """When checkpoints are taken automatically. Remembered per session.

    With neither ``every`` nor ``interval``, every cell is checkpointed within
    the overhead budget (``schedule.py``); ``every`` and ``interval`` are what
    the user asked for, whatever it costs.
    """

    auto: bool = True
    every: int | None = None
    interval: float | None = None
    exclude: list[str] = field(default_factory=list)

    @property
    def budgeted(self) -> bool:
        return self.every is None and self.interval is None

    @classmethod
    def remembered(cls, saved: dict[str, Any]) -> Policy:
        """A policy as ``Store.policy`` read it: of the fields this version knows (a newer one may remember more);
        IntegrityError for values changed by hand into ones no command sets."""
        try:
            return cls(**{f.name: saved[f.name] for f in fields(cls) if f.name in saved}).validate()
        except (TypeError, BadArgument):
            raise IntegrityError(
                f"the automatic policy remembered for this notebook is damaged ({DAMAGED_POLICY})"
            ) from None

    def validate(self) -> Policy:
        if self.every is not None and self.every < 1:
            raise BadArgument("--every must be at least 1")
        if self.interval is not None and not 0 < self.interval < math.inf:  # nan too
            raise BadArgument("--interval must be a positive number of seconds")
        for name in self.exclude:
            if not _NAME.match(name):
                raise BadArgument(f"{name!r} is not a variable name")
        return self


class Checkpointer:
    """Checkpoints of one kernel's namespace, in one session of one store."""

    def __init__(
        self,
        store: Store,
        session: str,
        module: types.ModuleType,
        *,
        hidden: Callable[[], Iterable[str]] = tuple,
        notify: Callable[[str], None] = lambda message: None,
        policy: Policy | None = None,
        background: bool = False,
        lazy: bool = False,
        replay_mode: str = "ask",
        run_cell: RunCell = exec_cell,
        configure: Callable[[list[str], list[tuple[int | None, str]]], dict[str, str]] | None = None,
        scheduler: Scheduler | None = None,
        replica: Replica | None = None,
        progress: Callable[[str], Progress] = no_progress,
        limits: Limits | None = None,
        on_head: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self._on_head = on_head  # told each time a checkpoint of this kernel's is its head
        self._revivals = 0  # times the store was removed while in use and made again (``Store.revive``)
        store.on_revive = self._revived
        self.timeline = Timeline(store)
        self.retention = Retention(store, limits or Limits(), self._protected, notify)
        self._saving: list[float] = []  # when each save not yet committed began, oldest first (the gc lease)
        self._in_flight: dict[float, int] = {}  # the bytes each forked save not yet committed is expected to write
        self.replica = replica
        # Gives each save or restore, by what it does ("restoring kernel checkpoint #3"), where to tell its progress.
        self._progress = progress
        self.session = session
        self.module = module
        self._hidden = hidden
        self._notify = notify
        self.policy = self._remembered(session) or (policy or Policy()).validate()
        self.head: int | None = None
        self.last_cell: int | None = None
        # The execution count of the last cell the namespace's state is after: what a checkpoint that no cell
        # asked for (manual, loop, interval) is recorded as taken after.
        self._state_cell: int | None = None
        # The ids of the objects each variable was bound to at the last checkpoint or restore (see restore).
        self._held: dict[str, int] | None = None
        self._cells_since = 0
        self._last_time = 0.0
        self.schedule = scheduler or Scheduler()
        # What the session's working directory, import path, environment variables, warning filters and loggers
        # are changes of.
        self._start = capture.Starts.now()
        self._cost_at_fork: float | None = None  # _writers_cost() when the first running writer was forked
        self._forks = 0  # writers forked so far
        self._forking = threading.Lock()  # held to fork a writer, or to make pages writable between forks
        self._writable_after = 0  # the pages were made writable again once that many had exited
        self._reported: set[tuple[str, str]] = set()
        self._skipped: dict[str, Skipped] = {}
        self._head_manifest: Manifest | None = None
        # The checkpoint the policy owes (trigger, status, cell): taken when idle, or as the next cell starts.
        self._owed: tuple[str, str, int | None] | None = None
        # The last cell boundary whose state no checkpoint holds yet, whether the policy owes it or skipped it:
        # what ``settle`` makes durable.
        self._unsaved: tuple[str, str, int | None] | None = None
        # The last restore's entry on the timeline and the checkpoint of the state it replaced: what an undo goes
        # back to while no cell has changed anything since (``_undo_restore``).
        self._replaced: tuple[int, int] | None = None
        # The newest state taken, whose save failed for want of room: ``wait`` tries it again, or says why not.
        self._full: tuple[str, str, int | None] | None = None
        self._full_error = ""  # what the store said of it
        self._pull_waited = False  # a look at the timeline has waited for the remote one to be pulled
        self._fork_refused: str | None = None
        self._writer_stopped = Notice(self._notify)  # why a writer was last stopped for memory in this kernel
        self._failing = Notice(self._notify)  # why automatic checkpoints fail, said once until one succeeds
        self._short_of_memory = Notice(self._notify)  # a write in the kernel would not fit (``_inline_fits``)
        self._lock = threading.RLock()
        self._sync = SyncWriter()
        self._fork = (
            ForkWriter(store.blobs.tmp, store.seal, functools.partial(store.unseal, what=RESULT))
            if background
            else None
        )
        # The pages of the large buffers written since the newest checkpoint's writer started: what an undo
        # need not hash.
        self._watch = WriteWatch()
        self.lazy = lazy
        self.replay_mode = check_mode(replay_mode)
        self._run_cell = run_cell
        # Runs the IPython configuration lines a whole restore brings back (shellconfig.apply), and makes again what
        # the checkpoint's cells registered with the shell (shellhooks.apply), if a shell does.
        self._configure = configure
        self.configuration: list[str] = []  # those lines, along the session's lineage (shellconfig.merged)
        # The attributes of modules and imported classes the cells change, with how (attributes.merged).
        self.assigned: dict[str, str] = {}
        self._pending: Recipe | None = None  # what the last restore could not bring back, to replay
        self._verifier: threading.Thread | None = None
        # The variables a lazy restore built on chunks that failed their signature check, and those larger than the
        # store's whole budget (``_leave_out_too_large``), with those objects and why: left out of checkpoints while
        # the names are bound to them.
        self._damaged: dict[str, tuple[Any, str]] = {}
        # Whether this kernel has restored its namespace (a whole one) yet.
        self.restored = False
        self.adopt_orphans()
        # The checkpoints this kernel committed: ``previous`` is the last good one another kernel left, here
        # or (pulled from the remote store) on another machine.
        self._mine: set[int] = set()
        if replica is not None:
            replica.kept = self.retention.measure  # a fetched checkpoint's blobs count against the budget here
            replica.start(session)  # pulls the session's remote timeline, then uploads what the remote lacks

    # -- taking checkpoints ---------------------------------------------------

    def record_cell(self, count: int | None, source: str, ok: bool, duration: float) -> None:
        """Add a finished cell to the session's history.

        On a disk too full for it, the cell is left out of the history, said once (the state it left is still
        owed: its checkpoint fails and is retried as any other on a full disk, and ``wait`` raises).
        """
        status = "ok" if ok else "error"
        self._state_cell = count
        if ok:
            self.configuration = shellconfig.merged(self.configuration, source)
            self.assigned = attributes.merged(self.assigned, source)
        try:
            self.last_cell = self.store.add_cell(self.session, self.last_cell, count, source, status, duration)
        except StoreFullError as e:  # said once, until a checkpoint is written again
            self._failing.tell(f"jupyter-ckpt: cells are not recorded in the notebook's history: {e}", reason="full")
        except StoreReadOnly as e:  # a store on a read-only disk: restored from, and said once
            self._failing.tell(f"jupyter-ckpt: nothing is checkpointed: {e}", reason=READ_ONLY)

    def after_cell(self, count: int | None, source: str, ok: bool, duration: float) -> int | None:
        """Record a finished cell and take the checkpoint the policy asks for at this boundary, if any.

        Under the default policy the cell is usually owed its checkpoint instead,
        taken when the kernel goes idle (``idle_tick``) or as the next cell starts
        (``before_cell``).
        """
        settings.remember()  # here, in the cells' thread: numpy's options are only seen there
        with self._lock:
            self.record_cell(count, source, ok, duration)
            self._cells_since += 1
            status = "ok" if ok else "error"
            self._unsaved = ("cell", status, count)
            if not self.policy.auto:
                return None
            if self.policy.budgeted:
                if self.schedule.cell_finished(count, duration):  # another such cell would pass max_lag
                    return self.save(trigger="cell", status=status, cell=count)
                self._owed = ("cell", status, count)
                return None
            self.schedule.ran(duration)
            trigger = self._due()
            return None if trigger is None else self.save(trigger=trigger, status=status, cell=count)

    def before_cell(self) -> int | None:
        """A cell is about to run: checkpoint the state the last one left if it is owed and the budget allows."""
        with self._lock:
            if not (self.policy.budgeted and self._owed is not None):
                return None
            self.commit_finished()  # children that are done have their cost charged
            # Before any is measured, a checkpoint is expected to cost a writer's pass over the kernel's memory.
            self.schedule.prior(resident_bytes() / PRIOR_RATE)
            if not self.schedule.cell_starting(self._accruing()):
                self._owed = None
                return None
            trigger, status, cell = self._owed
            return self.save(trigger=trigger, status=status, cell=cell)

    def _due(self) -> str | None:
        p = self.policy
        if p.interval is not None and time.time() - self._last_time >= p.interval:
            return "interval"
        if p.every is not None and self._cells_since >= p.every:
            return "cell"
        return None

    def commit_finished(self) -> None:
        """Commit the background writes that have finished; safe while a cell runs, as it takes no state."""
        with self._lock:
            if self._fork is not None:
                self._fork.poll()
                self._charge_copies()
                self._release_if_idle()

    def _writers_cost(self) -> float:
        """A running total of what writers cost the cells: the kernel's system time (the pages it copies
        while a child shares them, and any other, which errs on the side of fewer checkpoints) and the
        children's CPU time."""
        assert self._fork is not None
        return system_seconds() + self._fork.cpu_seconds()

    def _accruing(self) -> float:
        """What the writers running now have cost since the first of them was forked."""
        return 0.0 if self._cost_at_fork is None else self._writers_cost() - self._cost_at_fork

    def _charge_copies(self) -> None:
        """Once no child shares the heap, charge what the writers cost to the schedule."""
        if self._fork is not None and self._cost_at_fork is not None and not self._fork.busy:
            self.schedule.charge(self._accruing())
            self._cost_at_fork = None

    def make_writable_again(self, idle: Callable[[], bool] = lambda: True) -> None:
        """Once no writer is alive, make writable the pages the forks left write-protected
        (``WriteWatch.left_protected``), so that the next cells do not take a fault on each.

        Called while the kernel is idle, without the lock held. Between slices a writer may be forked (a fork
        waits for one slice at most), or a cell may start (``idle`` turns false) and fork a process of its own:
        the pages are then shared again, and a write would copy them, so it stops there.
        """
        with self._lock:
            fork, forks = self._fork, self._forks
            if fork is None or forks == self._writable_after or not idle() or fork.busy:
                return
        for lo, hi in self._watch.left_protected():
            # Slices aligned to huge pages, so that each can be merged into one.
            edges = [lo, *range(lo // WRITABLE_SLICE * WRITABLE_SLICE + WRITABLE_SLICE, hi, WRITABLE_SLICE), hi]
            for start, end in itertools.pairwise(edges):
                with self._forking:
                    if self._forks != forks or not idle():
                        return
                    self._watch.make_writable(start, end)
        self._writable_after = forks

    def idle_tick(self) -> int | None:
        """Called while the kernel is idle: commit finished writes, take an owed or periodic checkpoint."""
        # Here, not in every forked writer: 50 ms with pandas, sklearn and torch imported, and 10 ms to find the
        # project's own modules among their 2,300 (attributes.aliases).
        serialize.index_library()
        attributes.index_project()
        with self._lock:
            self.commit_finished()
            if self._owed is not None and (not self.policy.budgeted or self.schedule.idle_due()):
                trigger, status, cell = self._owed
                return self.save(trigger=trigger, status=status, cell=cell)
            p = self.policy
            if not (p.auto and p.interval is not None and self._cells_since > 0):
                return None
            if time.time() - self._last_time < p.interval:
                return None
            return self.save(trigger="interval", status="ok", cell=None)

    def save(
        self,
        *,
        trigger: str = "manual",
        status: str = "ok",
        cell: int | None = None,
        message: str | None = None,
        tag: str | None = None,
        wait: bool | None = None,
    ) -> int | None:
        """Checkpoint the namespace now.

        Manual checkpoints (and any with ``wait=True``) are durable when this
        returns, and their id is returned. Automatic ones are written by a forked
        child when the kernel has one: they return None at once. A request made
        with too little memory to fork while a child still writes is taken later,
        when the state is newer (coalesced).
        """
        if trigger not in TRIGGERS:
            raise BadArgument(f"unknown trigger {trigger!r}")
        if tag is not None:
            self._check_tag_free(check_tag(tag))
        if message is not None:  # refused before anything is written, not by the catalog afterwards
            check_text(message, "a message")
        wait = trigger == "manual" if wait is None else wait
        if wait and self._verifier is not None:
            self._verifier.join()
        with self._lock:
            if self._verifier is not None and self._verifier.is_alive():  # what it reports is not checkpointed
                self._owed = (trigger, status, cell)
                return None
            # A checkpoint the user's policy asks for at every N cells is taken whatever it costs (the spec).
            forced = trigger in ("cell", "interval") and not self.policy.budgeted
            writer = self._writer_for(wait, forced)
            if writer is None:
                self._owed = (trigger, status, cell)
                if wait and self._short_of_memory.current is not None:  # asked for now: said now, as an error
                    raise CheckpointFailed("checkpoint failed: too little memory left to write it; try again later")
                return None
            cap = capture.collect(self.module.__dict__, self._hidden(), self.policy.exclude, self._start, self.assigned)
            cap.configuration = self.configuration  # replaced, never changed in place, as cells run
            self._damaged = {n: d for n, d in self._damaged.items() if self.module.__dict__.get(n) is d[0]}
            cap.refused = {n: why for n, (_, why) in self._damaged.items()}
            cell = self._state_cell if cell is None else cell
            meta = capture.Meta(self.session, cell, self.last_cell, trigger, status, message, tag)
            outcome: dict[str, int | None] = {}

            previous = self._head_manifest
            epoch = self._watch.arm()  # before the writer starts: a page written after this is marked

            kernel, revivals = os.getpid(), self._revivals
            since = self._saving[0] if self._saving else meta.at  # when this kernel's oldest save in progress began

            def job(progress: Progress | None) -> list[Any]:
                if os.getpid() != kernel:  # a forked writer: what it writes stays, should its kernel die meanwhile
                    with contextlib.suppress(OSError):
                        self.store.blobs.hold(since)
                hashed: list[Seen] = []

                def observe(view: memoryview, keys: list[str]) -> None:
                    if (seen := observed(view, keys)) is not None:
                        hashed.append(seen)

                # A forked writer gives back each chunk it has stored, so that the cells beside it need not
                # copy those pages; the kernel itself (a write inline) must keep them.
                spent = memory.give_back if os.getpid() != kernel else None
                manifest, blobs = capture.prepare(
                    self.store.blobs, self.module, cap, meta, progress, previous, observe, spent
                )
                return _plain((manifest, blobs, hashed))

            def done(result: Any, error: BaseException | None) -> None:
                try:
                    written = None if error is not None else _written(result)
                    outcome["id"] = self._finish(cap, meta, written, error, raise_errors=wait, revivals=revivals)
                    if outcome["id"] is not None and written is not None:
                        self._watch.learn(epoch, written[2])
                finally:
                    self._settled(meta.at)

            started = time.perf_counter()
            try:
                # The room under the budget, less what the writers still running are expected to take.
                self.store.blobs.limit = self.retention.limit(pending=sum(self._in_flight.values()))
                self.store.blobs.hold(since)
            except OSError as e:  # a store gone read-only, a directory it cannot write: nothing was written
                why = f"cannot write to the checkpoint store {self.store.root}: {e.strerror or e}"
                if wait:
                    raise CheckpointFailed(f"checkpoint failed: {why}") from None
                self._failing.tell(
                    f"jupyter-ckpt: checkpoint failed: {why}", reason=READ_ONLY if e.errno == errno.EROFS else why
                )
                self._owe(trigger, status, cell)
                return None
            self._saving.append(meta.at)
            try:
                with self._forking:
                    writer.submit(job, done, self._progress("saving a kernel checkpoint") if wait else None)
                    if writer is self._fork:
                        self._forks += 1
                        self._in_flight[meta.at] = self._needed(cap)
            finally:
                self._release_if_idle()
            self.schedule.taken(time.perf_counter() - started)
            if writer is self._fork and self._cost_at_fork is None:
                self._cost_at_fork = self._writers_cost()
            self._owed = self._unsaved = None
            self._cells_since = 0
            self._last_time = meta.at  # the policy counts from when the state was taken
            if wait:
                try:
                    writer.poll(block=True)
                except CheckpointFailed as e:
                    if not isinstance(e.__cause__, WriterStopped):
                        raise
                    # Its writer stopped for memory while the user waits for it: written at once, from the kernel
                    # itself while a child's copies would not fit (``_writer_for``), which needs no room for them.
                    return self.save(trigger=trigger, status=status, cell=cell, message=message, tag=tag, wait=True)
                self._release_if_idle()
            return outcome.get("id")

    def _settled(self, at: float) -> None:
        """The save begun at ``at`` is committed or failed, and so is every one begun before it (saves are
        collected in order; a dropped one is never collected): move this kernel's gc lease to the oldest left."""
        self._saving = [t for t in self._saving if t > at]
        self._in_flight = {t: n for t, n in self._in_flight.items() if t > at}
        if self._saving:
            self.store.blobs.hold(self._saving[0])
        else:
            self.store.blobs.release()

    def _release_if_idle(self) -> None:
        """No save is in progress any more: a gc may collect what the saves left unreferenced (LocalBlobs.hold)."""
        if self._fork is None or not self._fork.busy:
            self._saving.clear()
            self._in_flight.clear()
            self.store.blobs.release()
            self.retention.idle()

    def _writer_for(self, wait: bool, forced: bool) -> SyncWriter | ForkWriter | None:
        """The fork writer when it is safe, else the inline one; None to wait for the writes in progress, unless
        the checkpoint is ``forced`` (``--every``, ``--interval``): then the cell waits for them.

        Once a writer was stopped as stuck (``ForkWriter.stalled``), the inline one: what made it wait does not
        make the kernel wait. Once a writer was stopped for memory, the inline one also while the kernel's
        private memory, copied beside a child, would not fit the headroom: an inline
        write needs no room for copies, and writes only the blobs the store lacks.
        Waiting saves first let the running children finish. An inline write never
        overtakes a child's: checkpoints are committed in the order they were taken.
        """
        if self._fork is None:
            return self._sync
        if wait:
            self._fork.poll(block=True)
        reason = fork_unsafe_reason() or self._fork.stalled
        refused = None if reason is None else re.sub(r"\d[\d.]*", "N", reason)  # other numbers: the same condition
        if refused is not None and refused != self._fork_refused:
            self._notify(f"jupyter-ckpt: writing checkpoints in the kernel itself: {reason}")
        self._fork_refused = refused
        if reason is None and self._fork.copies_fit():
            return self._fork
        if forced:
            self._fork.poll(block=True)
        return None if self._fork.busy or not self._inline_fits() else self._sync

    def _inline_fits(self) -> bool:
        """Whether a write in the kernel itself would leave the headroom's reserve. It pickles each group whole
        in memory: at most about the kernel's private memory, less the arrays it writes from their own memory.
        When it would not, that is said once and the state stays owed, written once there is room (a kernel
        killed for memory by its own checkpoint is the loss the tool must never cause)."""
        room, private = memory.headroom(), memory.copy_estimate()
        if room is None or private is None:
            return True
        arrays = sum(  # at the top level only: an array in a list counts as pickled, which errs on the safe side
            serialize.size_hint(v)
            for v in list(self.module.__dict__.values())
            if type(v).__module__.partition(".")[0] in _BUFFERED
        )
        need = max(0, private - arrays)
        if need <= room.free - memory.reserve(room):
            self._short_of_memory.clear()
            return True
        self._short_of_memory.tell(
            f"jupyter-ckpt: not checkpointed for now: writing from the kernel itself could take up to "
            f"{human_bytes(need)}, and only {room}; the state is written once there is room",
            reason="inline",
        )
        return False

    def _finish(
        self,
        cap: capture.Capture,
        meta: capture.Meta,
        result: Any,
        error: BaseException | None,
        *,
        raise_errors: bool,
        revivals: int,
    ) -> int | None:
        """Commit what a writer produced: the catalog row makes the checkpoint exist. ``revivals``: how many times
        the store had been made again when the save began (``_revived``)."""
        try:
            if error is not None:
                raise error
            self._recover_head(committing=True)
            manifest = capture.link(result[0], self.head, self._head_manifest)
            cid = self.store.commit(self.session, manifest, result[1])
            new = [b for b in result[1].values() if b.new]
            fits_again = self.retention.committed(sum(b.stored for b in new), len(new))
        except WriterStopped as e:  # killed to free memory: said once, and the state owed to the inline writer
            self.retention.failed(0, None)  # what it wrote before it was killed: its temp files, its blobs
            if raise_errors:
                self._writer_stopped.current = str(e)  # said by the error raised
                raise CheckpointFailed(f"checkpoint failed: {e}") from e
            # The children stopped at one moment share one reason: said once.
            self._writer_stopped.tell(
                f"jupyter-ckpt: {e}; the state will be written from the kernel when it is idle", reason=str(e)
            )
            if meta.at == self._last_time:  # no newer state was taken since
                self._owe(meta.trigger, meta.status, meta.cell)
            return None
        except Exception as e:
            with contextlib.suppress(CheckpointError, OSError):  # one that cannot be made again: said by the next save
                self.store.revive()  # removed under the writer (``rm -rf``, its disk unmounted): made again, and said
            if self._revivals != revivals:  # the state goes to the new store: nothing else to say
                if raise_errors:
                    raise CheckpointFailed(
                        f"checkpoint failed: the checkpoint store {self.store.root} was removed while it was written; "
                        "save again to keep this state in the new store"
                    ) from e
                if meta.at == self._last_time:  # no newer state was taken since
                    self._owe(meta.trigger, meta.status, meta.cell)
                return None
            full = isinstance(e, StoreFullError) or str(e).startswith(StoreFullError.__name__)  # here, or in a writer
            retry = (lambda: self._owe(meta.trigger, meta.status, meta.cell)) if full else None
            if full and meta.at == self._last_time:  # no newer state was taken since
                self._full, self._full_error = (meta.trigger, meta.status, meta.cell), str(e)
            left_out = self._leave_out_too_large(cap) if full else 0
            if left_out and meta.at == self._last_time:
                self._owe(meta.trigger, meta.status, meta.cell)  # taken again without them, which may fit
            self.retention.failed(self._needed(cap) - left_out if full else 0, retry)
            if raise_errors:
                raise e if isinstance(e, CheckpointError) else CheckpointFailed(f"checkpoint failed: {e}") from e
            if not full:  # a store out of room: Retention says so, once, if it cannot make room
                self._failing.tell(f"jupyter-ckpt: checkpoint failed: {e}", reason=str(e))
            return None
        self._committed(cid, manifest, cap, failed_before=fits_again)
        return cid

    def _revived(self, message: str) -> None:
        """The store was removed while in use and made again: said once (``message``); the saves under way then
        failed for it, and are taken again in the new store without another word (``_finish``)."""
        self._revivals += 1
        self._notify(message)

    def _leave_out_too_large(self, cap: capture.Capture) -> int:
        """After a save found no room: leave out of the checkpoints each variable it bound anew that is larger than
        the store's whole budget, for which no thinning makes room, as one that cannot be serialized (skipped, said
        once, rebuilt by replay) while its name stays bound to it. Returns their bytes.

        Otherwise every checkpoint failed while one was bound, and a kernel lost then lost every cell since."""
        budget = self.retention.usage().budget
        held = self._held or {}
        left_out = 0
        for name, value in cap.variables.items():
            size = serialize.size_hint(value)
            if held.get(name) != cap.ids.get(name) and size > budget:
                self._damaged[name] = (
                    value,
                    f"{human_bytes(size)}, larger than the checkpoint store's whole budget ({human_bytes(budget)}); "
                    "raise c.Checkpoints.max_store_size to keep it",
                )
                left_out += size
        return left_out

    def _needed(self, cap: capture.Capture) -> int:
        """About how many bytes a checkpoint of ``cap`` writes: the variables bound anew since the last one."""
        hints = capture.size_hints(cap, self._head_manifest)
        held = self._held or {}
        return sum(hints[n] for n in cap.variables if held.get(n) != cap.ids.get(n))

    def _owe(self, trigger: str, status: str, cell: int | None) -> None:
        """Take a checkpoint when the kernel is next idle, unless a newer state is owed already."""
        if self._owed is None:
            self._owed = (trigger, status, cell)
            if self.schedule.owed is None:  # where the default policy's idle tick looks for what is owed
                self.schedule.owed = -1 if cell is None else cell

    def adopt_orphans(self) -> list[int]:
        """Commit the session's checkpoints whose writer finished after its kernel was killed (``writer.adopt``)."""
        return adopt(self.store, [self.session], self._notify)

    def _recover_head(self, *, committing: bool = False) -> None:
        """If the head was deleted (``delete``, the server's API, a ``gc``), move it back as the store moves the
        deleted one's children: to its parent, or to the session's newest checkpoint if that is gone too.

        The namespace is still in the deleted checkpoint's state (unless cells ran since, or a checkpoint of a
        later state is being ``committing``), which no checkpoint holds now: an undo or a restore checkpoints it
        first, as a state the policy skipped, and counts back from it. Counted from the parent, an undo went one
        state too far and dropped this one."""
        if self.head is None or self.store.exists(self.head):
            return
        gone = self._head_manifest
        if gone is not None and self._unsaved is None and not committing:
            self._unsaved = ("cell", gone["status"], gone["cell"])
        parent = gone["parent"] if gone else None
        if parent is None or not self.store.exists(parent):
            newest = self.checkpoints_committed()
            parent = newest[-1].id if newest else None
        self.head = parent
        self._head_manifest = self.store.manifest(parent) if parent is not None else None

    def _committed(self, cid: int, manifest: Manifest, cap: capture.Capture, failed_before: bool = False) -> None:
        """A checkpoint is on the timeline: it is the head, and a failure said before is over."""
        if self._failing.clear() or failed_before:
            self._notify(f"jupyter-ckpt: checkpoints are written again (checkpoint {cid})")
        self._full = None
        self.head = cid
        self._head_manifest = manifest
        self._held = cap.ids
        self._mine.add(cid)
        self._on_head()
        self._upload_soon()
        self._skipped = manifest["skipped"]
        fresh = [
            f"{name} ({info['type']}: {info['reason']})"
            for name, info in sorted(manifest["skipped"].items())
            if (name, info["reason"]) not in self._reported
        ]
        self._reported.update((n, i["reason"]) for n, i in manifest["skipped"].items())
        if fresh:
            self._notify("jupyter-ckpt: not checkpointed: " + "; ".join(fresh))

    def _upload_soon(self) -> None:
        """The timeline changed: the remote store, if there is one, follows it from its own thread."""
        if self.replica is not None:
            self.replica.poke()

    def here(self, every: float | None = None) -> bool:
        """A milestone inside a long loop, at most one per ``every`` seconds (default: the policy's interval, else
        ``max_lag``, which bounds the distance between checkpoints): whether this call took one (written in the
        background: ``wait()`` makes it durable)."""
        limit = every if every is not None else self.policy.interval or self.schedule.max_lag
        if time.time() - self._last_time < limit:
            return False
        self.save(trigger="loop")
        return True

    def wait(self, *, retry_full: bool = True, take_owed: bool = True) -> None:
        """Block until every checkpoint already requested is durable, and the remote timeline is pulled.

        The newest state, if its save found the store full, is saved again (``retry_full``): its error is
        raised if there is still no room. A look at the timeline (``_catch_up``) does not try it again.
        Without ``take_owed`` (a cell runs: the state owed is gone), only the writes in flight are finished.
        """
        if self.replica is not None and not self._pull_waited:
            # Once: a store that does not answer holds up one look at the timeline, not every one.
            self.replica.pulled.wait(PULL_WAIT)
            self._pull_waited = True
        with self._lock:
            if self._fork is not None:
                self._fork.poll(block=True)
            newest = self._owed or (self._full if retry_full else None)
            if newest is not None and take_owed:
                trigger, status, cell = newest
                self.save(trigger=trigger, status=status, cell=cell, wait=True)
            self._recover_head()

    # -- going back -----------------------------------------------------------

    def start_with(self, name: str, value: str) -> None:
        """Set environment variable ``name`` as if the kernel had started with it: not a change the cells made, so
        no checkpoint records it and a restore leaves it as it is."""
        os.environ[name] = value
        self._start.environment.variables[name] = value

    def resolve(self, ref: str | int) -> CheckpointRecord:
        """The checkpoint a REF names (``Timeline.resolve``: ``-N`` from this kernel's head, ``previous`` among
        the checkpoints other kernels left), once every requested checkpoint is on the timeline."""
        self._catch_up()
        return self.timeline.resolve(self.session, ref, head=self.head, mine=self._mine)

    def nothing_done(self) -> bool:
        """Whether this kernel has done nothing a restore would undo: no cell ran, or none left a variable
        (``%load_ext`` in one cell, ``%checkpoint session NAME`` in the next)."""
        return self.last_cell is None or not self.holds_variables()

    def holds_variables(self) -> bool:
        """Whether the namespace holds a variable a checkpoint would save."""
        hidden = self._hidden()
        return any(capture.is_user_variable(n, v, hidden) for n, v in self.module.__dict__.items())

    def resume_offer(self) -> dict[str, Any] | None:
        """What this kernel offers to bring back (``Timeline.resume_offer``), until it restores something."""
        return None if self.restored else self.timeline.resume_offer(self.session, self._mine)

    def restore(
        self,
        ref: str | int = "latest",
        *,
        only: Iterable[str] | None = None,
        trigger: str = "restore",
        replay_mode: str | None = None,
    ) -> RestoreReport:
        """Make the namespace what it was at ``ref``; returns what was read, patched, kept and removed.

        Variables the checkpoint could not hold are rebuilt by running their cells
        again (``replay_mode`` ``auto``), offered for ``replay()`` (``ask``), or
        only listed (``never``); the default is the Checkpointer's mode.

        ``-N`` counts from the state the last cell left (``_step_from_now``).
        """
        mode = self.replay_mode if replay_mode is None else check_mode(replay_mode)
        only = variable_names(only)
        with self._lock:
            try:
                if (steps := steps_back(ref)) is not None:
                    ref = self._step_from_now(steps)
                target = self.resolve(ref)
            except UnknownCheckpoint as e:
                if not self.schedule.skipped or not (steps is not None or str(ref).strip() == "last-good"):
                    raise
                why = "; ".join(f"{n} {reason}" for reason, n in self.schedule.skipped.items())
                raise UnknownCheckpoint(
                    f"{e}. Cell boundaries this kernel did not checkpoint: {why} "
                    "(`%checkpoint auto on --every 1` checkpoints every cell)"
                ) from e
            manifest = self.store.manifest(target.id)
            number = self.timeline.number(self.session, target.id)
            after = " into the new kernel after a crash" if trigger == "crash-restore" else ""
            # Pulled from the remote store: read from the downloaded bytes, written here afterwards.
            fetched = self.replica.fetched(target.id) if self.replica is not None else contextlib.nullcontext()
            # Where the session found its files and modules, and the environment its libraries read as they are
            # imported, before anything is imported or unpickled; put back if the restore fails.
            whole = only is None
            kept_paths = paths.applied(manifest.get("paths"), self._start.paths if whole else None)
            environ = environment.applied(manifest.get("environment"), self._start.environment if whole else None)
            held = loggers.holders(self.module.__dict__)  # the notebook's handlers, to take off unless kept
            with (
                naming(f"#{number} (id {target.id})"),
                fetched,
                kept_paths as paths_failed,
                environ as environment_failed,
            ):
                report = restore_namespace(
                    self.store.blobs,
                    self.module,
                    target.id,
                    manifest,
                    held=self._held,
                    known=self._watch.keys,
                    only=only,
                    hidden=self._hidden(),
                    exclude=self.policy.exclude,
                    lazy=self.lazy,
                    progress=self._progress(f"restoring kernel checkpoint #{number}{after}"),
                    # By id or tag, as -N does (_step_from_now): the state replaced stays on the timeline.
                    applying=self._keep_replaced if steps is None else None,
                )
            report.not_restored.update(paths_failed | environment_failed)
            report.number = number
            if whole:
                namespace = self.module.__dict__
                report.not_restored.update(warnfilters.apply(manifest.get("warnings"), self._start.filters, namespace))
                report.not_restored.update(loggers.apply(manifest.get("logging"), self._start.loggers, namespace, held))
                self.configuration = list(manifest.get("configuration", self.configuration))
                self.assigned = dict(manifest.get("attributes", self.assigned))
                if self._configure is not None:  # with the cells that made the state, for what they registered
                    try:
                        history = self.store.history(manifest)
                    except IntegrityError as e:  # a recorded cell was changed: none is read, and the restore stands
                        history = []
                        report.not_restored["what the cells registered with IPython"] = f"not registered again: {e}"
                    cells = [(c["count"], c["source"]) for c in history if c["status"] == "ok"]
                    report.not_restored.update(self._configure(self.configuration, cells))
                self._record_restore(target, manifest, trigger)
            self._offer_replay(report, manifest, mode)
            if report.unverified:
                self._verifier = threading.Thread(
                    target=self._verify_mapped,
                    args=(report, capture.blob_sizes(manifest)),
                    name="jupyter-ckpt-verify",
                    daemon=True,
                )
                self._verifier.start()
            return report

    def _verify_mapped(self, report: RestoreReport, sizes: dict[str, int]) -> None:
        """Check the signatures of the chunks a lazy restore mapped (of the ``sizes`` their manifest gives: a file
        grown since is refused unread); report the variables of any that fail."""
        with contextlib.suppress(OSError):  # the user's cells first
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        failed: dict[str, str] = {}
        for key in report.unverified:
            try:
                self.store.blobs.read(key, size=sizes.get(key))
            except CheckpointError as e:
                failed[key] = str(e)
        if failed:
            names = report.lazy_names(failed)
            why = f"restored from checkpoint {report.checkpoint}, whose {next(iter(failed.values()))}"
            namespace = self.module.__dict__
            self._damaged = {**self._damaged, **{n: (namespace[n], why) for n in names if n in namespace}}
            self._notify(
                f"jupyter-ckpt: {', '.join(names)} as restored from checkpoint {report.checkpoint} may hold "
                f"damaged values: {next(iter(failed.values()))}. Restore them from another checkpoint, or recompute "
                "them; until then they are left out of checkpoints."
            )

    def settle(self) -> None:
        """What ``jupyter_ckpt.wait()`` and ``%checkpoint wait`` promise: the state the cells before them left
        is durable under any automatic policy, and so is every checkpoint already requested (in the remote
        store too, if there is one); the chunks mapped by the last lazy restore are verified (or reported).

        Called inside a cell, after back-to-back cells whose boundaries the budget skipped (or that
        ``--every N`` has not reached), the state is checkpointed here, from the namespace as it is: the
        user calls ``wait()`` right before something risky, and the next cell boundary may never come.
        """
        self.wait()
        with self._lock:
            if self.policy.auto:
                self._save_unsaved()
        self.retention.settle()
        if self._verifier is not None:
            self._verifier.join()
        if self.replica is not None:
            self.replica.flush()

    def _step_from_now(self, steps: int) -> str:
        """The REF of the state ``steps`` back from the one the last cell left; that state is checkpointed first
        if the policy skipped it (cells back to back past the budget, ``auto off``), so that it stays on the
        timeline. Going back from the newest checkpoint instead went further back than asked, without a word,
        and dropped that state. Checked first: the steps must reach from it (one fewer from the newest
        checkpoint), so a REF that cannot be reached changes nothing. A store too full for it does not keep
        the restore from running: that is said, and the steps count from the newest checkpoint, one fewer."""
        self._catch_up()  # the head as the store has it now: deleted meanwhile, its state is unsaved (_recover_head)
        if self._unsaved is None:
            return f"-{steps}"
        fewer = f"-{steps - 1}" if steps > 1 else "latest" if self.head is None else str(self.head)
        self.resolve(fewer)  # raises UnknownCheckpoint when even the saved state would not reach
        return f"-{steps}" if self._keep_replaced() else fewer

    def _keep_replaced(self) -> bool:
        """Checkpoint the state a restore is about to replace if the policy skipped it, so that the restore loses
        nothing; whether it is on the timeline. A store that refuses it does not keep the restore from running:
        that is said."""
        try:
            self._save_unsaved()
        except CheckpointError as e:
            self._notify(f"jupyter-ckpt: the state this restore replaces could not be checkpointed first: {e}")
            return False
        return True

    def _save_unsaved(self) -> None:
        """Checkpoint the state the last cell left, if the policy skipped it (cells back to back past the budget,
        ``--every N``, automatic checkpoints off)."""
        if self._unsaved is not None:
            trigger, status, cell = self._unsaved
            self.save(trigger=trigger, status=status, cell=cell, wait=True)

    def _record_restore(self, target: CheckpointRecord, manifest: Manifest, trigger: str) -> None:
        """Put the restore on the timeline: an entry with the target's content, so the next cell branches from it."""
        # A kernel that begins by restoring has no root checkpoint of its own: the message marks its start.
        message = ("" if self.head is not None else NEW_KERNEL) + f"restored checkpoint {target.id}"
        entry: Manifest = {
            **manifest,
            "uid": new_uid(),  # a checkpoint of its own: the target's uid is committed once (``Store.commit``)
            "parent": target.id,
            "trigger": trigger,
            "time": time.time(),
            "changed": [],
            "removed": [],
            "tag": None,
            "message": message,
            "cell": target.cell,
        }
        blobs = {k: BlobInfo(k, 0, 0, new=False) for k in capture.blob_keys(manifest)}
        replaced = self.head if self._unsaved is None else None  # the state replaced, if the timeline holds it
        try:
            cid = self.store.commit(self.session, entry, blobs)
        except StoreReadOnly as e:  # restored from a store on a read-only disk: the namespace is back all the same
            self._failing.tell(f"jupyter-ckpt: the restore is not on the timeline: {e}", reason=READ_ONLY)
            cid = None
        self._replaced = (cid, replaced) if cid is not None and replaced is not None else None
        self.restored = True
        self._unsaved = None  # the namespace is the target's state, which is on the timeline
        self.last_cell, self._state_cell = manifest["last_cell"], target.cell
        ids = {n: id(self.module.__dict__[n]) for n in manifest["variables"] if n in self.module.__dict__}
        # The restore's report names what it could not bring back: not again as "not checkpointed".
        self._reported.update((n, i["reason"]) for n, i in manifest["skipped"].items())
        if cid is None:  # the target is where the namespace is, as the entry would have been
            self.head, self._head_manifest, self._held = target.id, manifest, ids
        else:
            self._committed(cid, entry, capture.Capture({}, {}, ids))

    def _offer_replay(self, report: RestoreReport, manifest: Manifest, mode: str) -> None:
        """Plan how to rebuild the variables the restore left absent, skipped or not loaded (a ``__reduce__``
        calling a function whose globals lack a class not bound yet), and replay now or offer it. (An attribute
        of a module that could not be saved is not absent: it keeps the value its module has.) What was made after
        a skipped variable holding its objects (the optimizer of a model that could not be saved) is made again
        with it, even by cells that do not name it (``plan``)."""
        assigned = manifest.get("attributes", {})
        kept = manifest["skipped"].keys() | manifest["variables"].keys()
        missing = [n for n in report.not_restored if n in kept and n not in self.module.__dict__ and n not in assigned]
        self._pending = None
        if not missing or mode == "never":
            return
        shared: dict[str, set[str]] = {}  # the restored variables that shared objects with missing ones
        for name in (n for n in missing if n in manifest["skipped"]):
            for other in manifest["skipped"][name].get("shares", []):
                if other in self.module.__dict__ and other not in assigned:
                    shared.setdefault(other, set()).add(name)
        try:
            recipe = plan(missing, self.store.history(manifest), shared)
        except IntegrityError as e:  # a recorded cell was changed: nothing of that history runs
            report.replay = dict.fromkeys(missing, f"not replayed: {e}")
            return
        report.replay = dict(recipe.problems)
        if mode == "auto":
            report.replay = self._run_recipe(recipe)
        elif recipe.runnable:
            self._pending = recipe
            report.replayable = recipe.describe()
            report.replay_cells = [{"count": c["count"], "source": c["source"]} for c in recipe.cells]

    def replay(self) -> dict[str, str]:
        """Run the cells that rebuild what the last restore could not bring back; returns what each gave."""
        with self._lock:
            if self._pending is None:
                raise BadArgument("nothing to replay: the last restore brought back every variable it could rebuild")
            recipe, self._pending = self._pending, None
            return self._run_recipe(recipe)

    def _run_recipe(self, recipe: Recipe) -> dict[str, str]:
        """Replay; the random streams and the libraries' settings stay as they were before, as the restore set
        them: a replayed cell's ``random.seed`` or ``pd.set_option`` is not one of the variables taken from it."""
        before = capture.process_states()
        try:
            return run_recipe(recipe, self.module.__dict__, self._run_cell)
        finally:
            set_process_states(before, self.module)

    def undo(self) -> RestoreReport:
        """Back to the state before the last cell that changed something; when that was a restore, to the state
        the restore replaced (``_undo_restore``). When there is none, the error says which cell boundaries
        this kernel's policy did not checkpoint, and why (``restore``): the usual cause, cells run back to back.

        It goes back from the state the last cell left, which is checkpointed first when the policy skipped it
        (``_step_from_now``), not from an older one. When the boundary before the last cell was skipped too, the state
        restored is the newest before it, and the report names the cells it undoes as well (``also_undone``).
        """
        undone = self.last_cell
        back = self._undo_restore()
        report = self.restore("-1" if back is None else back)
        self._replaced = None  # an undo is not undone by the next one: that goes on back
        if undone is not None and back is None:
            with contextlib.suppress(IntegrityError):  # a history changed since: the restore stands, unannotated
                between = self.store.cells(undone, after=self.last_cell)  # after the state restored, to the last
                counts = [c["count"] for c in between if not only_checkpoint_magics(c["source"])]
                report.also_undone = counts[:-1]
                # Each undone cell's own checkpoint, if it has one: one that changed nothing was stepped over.
                states = {
                    r.cell: r for r in self.checkpoints_committed() if r.id in self._mine and r.id > report.checkpoint
                }
                report.unchanged = [n for n in counts if n in states and not states[n].changed]
                report.not_checkpointed = [n for n in report.also_undone if n not in states]
        return report

    def _undo_restore(self) -> int | None:
        """The state the last restore replaced, if no cell has changed anything since: then the restore is the
        last change, and an undo takes it back (walking up the restored state's parents went further into the
        past). None otherwise."""
        if self._replaced is None:
            return None
        entry, replaced = self._replaced
        self._catch_up()
        if not self._keep_replaced():  # the state the cells since left, to see whether they changed anything
            return None
        records = {r.id: r for r in self.checkpoints_committed()}
        node = self.head
        while node is not None and node != entry and node in records and not records[node].changed:
            node = records[node].parent
        return replaced if node == entry and replaced in records else None

    # -- looking ----------------------------------------------------------------

    def _catch_up(self) -> None:
        """Put the checkpoints already requested on the timeline before a look at it. A look always answers:
        a save that fails here is reported beside the answer (``notify``), never instead of it."""
        try:
            self.wait(retry_full=False)
        except CheckpointError as e:
            self._notify(f"jupyter-ckpt: the newest state is not on the timeline: {e}")

    def checkpoints(self, n: int | None = None) -> list[CheckpointRecord]:
        """The session's checkpoints, oldest first (the last ``n`` if given), including any being written."""
        self._catch_up()
        records = self.checkpoints_committed()
        return records[-n:] if n else records

    def diff(self, a: str | int | None = None, b: str | int | None = None) -> Diff:
        """Variables added, removed and changed from ``a`` (default: the last checkpoint) to ``b`` (default: now)."""
        self._catch_up()
        if a is None:
            if self.head is None:
                raise UnknownCheckpoint("no checkpoint yet in this kernel to compare with")
            a = self.head
        before = self.store.manifest(self.resolve(a).id)
        after = self.store.manifest(self.resolve(b).id) if b is not None else self.describe_now()
        return diff_manifests(before, after)

    def describe_now(self) -> Manifest:
        """The live namespace shaped like a manifest (hashed, not written)."""
        with self._lock:
            cap = capture.collect(self.module.__dict__, self._hidden(), self.policy.exclude)
            _, variables, skipped, _ = capture.pack(self.module, cap, capture.hash_only)
            return {"variables": variables, "modules": cap.modules, "skipped": skipped}

    def history(self, ref: str | int | None = None) -> list[Cell]:
        """The cells executed up to ``ref`` (default: now), oldest first."""
        if ref is None:
            return self.store.cells(self.last_cell)
        return self.store.history(self.store.manifest(self.resolve(ref).id))

    def checkpoints_committed(self) -> list[CheckpointRecord]:
        """The session's checkpoints in the catalog now, without waiting for writes in progress."""
        return self.timeline.committed(self.session)

    def status(self) -> Status:
        """Where things stand, without waiting for a write in progress."""
        with self._lock:
            writing = self._fork is not None and self._fork.busy
        records = self.checkpoints_committed()
        last = records[-1] if records else None
        return {
            "store": str(self.store.root),
            "session": self.session,
            "policy": asdict(self.policy),
            "checkpoints": len(records),
            "bytes": sum(r.new_bytes for r in records),
            "last_checkpoint_age": time.time() - last.time if last else None,
            "writing": writing,
            "skipped": {n: i["reason"] for n, i in self._skipped.items()},
            "schedule": self.schedule.report(),
            "remote": self.replica.status() if self.replica is not None else None,
            "usage": usage(self.store, self.retention.limits).as_dict(),
            "retention_error": self.retention.error,
            "writer_stopped": self._writer_stopped.current,
            "no_room": None if self._full is None else f"the state after cell {self._full[2]}: {self._full_error}",
        }

    # -- changing the policy and the timeline ------------------------------------

    def move_to(self, session: str, *, take_along: bool) -> None:
        """Go on in session ``session``: the kernel's notebook was named after it started (VS Code names it
        by code it runs after start-up), or the user named the session by hand.

        With ``take_along`` (the kernel was in a session of its own), what it
        recorded there joins the new session, so nothing is lost. Else the session
        it leaves keeps its history, as it is another notebook's or name's, and the
        new session's first checkpoint has its parent there. Either way ``previous``
        is then what the new session's earlier kernels left, and its policy (if it
        has one), the results its killed kernels' writers left and its remote
        timeline apply. The writes in progress are committed first: what is left in
        the temp directory then is other kernels' (``adopt_orphans``).
        """
        with self._lock:
            if self._fork is not None:
                self._fork.poll(block=True)
            if take_along:
                self.store.move_session(self.session, session)
            self.session = session
            if (remembered := self._remembered(session)) is not None:
                self.policy = remembered
            self.adopt_orphans()
            if self.replica is not None:
                self.replica.follow(session)
                self._pull_waited = False

    def _remembered(self, session: str) -> Policy | None:
        """The policy ``session`` remembers; None if it has none, or one damaged in the catalog (said)."""
        try:
            saved = self.store.policy(session)
            return Policy.remembered(saved) if saved is not None else None
        except IntegrityError as e:
            self._notify(f"jupyter-ckpt: {e}; the default applies until one is set (%checkpoint auto)")
            return None

    def set_policy(self, **changes: Any) -> Policy:
        policy = Policy(**{**asdict(self.policy), **changes}).validate()
        self.store.set_policy(self.session, asdict(policy))
        if changes.keys() - {"exclude"}:  # a new schedule counts its cells afresh; excluding a variable is none
            self._cells_since = 0
        self.policy = policy
        return policy

    def exclude(self, names: Iterable[str]) -> Policy:
        return self.set_policy(exclude=sorted(set(self.policy.exclude) | set(names)))

    def include(self, names: Iterable[str]) -> Policy:
        return self.set_policy(exclude=sorted(set(self.policy.exclude) - set(names)))

    def _check_tag_free(self, tag: str) -> None:
        try:
            taken = self.resolve(tag)
        except UnknownCheckpoint:
            return
        if taken.tag == tag:
            raise BadArgument(f"tag {tag!r} is already used by checkpoint {taken.id}")

    def tag(self, ref: str | int, tag: str | None) -> CheckpointRecord:
        tagged = self.timeline.tag(self.resolve(ref).id, tag)
        self._upload_soon()
        return tagged

    def delete(self, ref: str | int) -> CheckpointRecord:
        with self._lock:
            target = self.resolve(ref)
            self.timeline.delete([target.id])
            self._upload_soon()
            self._recover_head()
            return target

    def own_bytes(self) -> int:
        """The bytes of the blob files this session's checkpoints reference (shared with others' or not)."""
        return self._measure_own()()

    def _measure_own(self) -> Callable[[], int]:
        """What measures ``own_bytes`` as checkpoints go: each manifest and blob file read once."""
        keys: dict[int, list[str]] = {}
        sizes = {key: stat.size for key, stat in self.store.blobs.listing().items()}

        def measure() -> int:
            held: set[str] = set()
            for record in self.checkpoints_committed():
                if record.id not in keys:
                    with contextlib.suppress(CheckpointError):  # damaged, or deleted meanwhile: counts nothing
                        keys[record.id] = capture.blob_keys(self.store.manifest(record.id))
                held.update(keys.get(record.id, ()))
            return sum(sizes.get(key, 0) for key in held)

        return measure

    def _protected(self) -> set[int]:
        """What thinning must keep for this kernel besides ``timeline.never_thinned``: its head (undo)."""
        return {self.head} if self.head is not None else set()

    def gc(self, keep_last: int = 20, max_size: int | None = None, *, everywhere: bool = False) -> Thinned:
        """Thin this session's old untagged checkpoints (every session's with ``everywhere``), keeping the newest
        ``keep_last`` and one per power-of-two window of age before them, then more until they fit ``max_size``:
        this session's checkpoints (``own_bytes``), as they are the ones thinned, or with ``everywhere`` the
        store; then drop unreferenced blobs."""
        with self._lock:
            self._catch_up()
            self.retention.settle()
            sessions, measure = (None, None) if everywhere else ([self.session], self._measure_own())
            thinned = self.timeline.gc(sessions, keep_last, max_size, self._protected(), measure)
            self._upload_soon()
            self._recover_head()
            return thinned


def variable_names(only: Iterable[str] | str | None) -> list[str] | None:
    """The variables a restore is limited to: a string is one name, or several separated by commas as in
    ``--only a,b`` (it was read letter by letter: ``only="xy"`` restored ``x`` and ``y``). None is all of them."""
    if only is None:
        return None
    names: list[Any] = [only]  # not iterable: refused below
    if isinstance(only, str):
        names = only.split(",")
    elif isinstance(only, Iterable):
        names = list(only)
    if not all(isinstance(n, str) for n in names):
        raise BadArgument(f"a restore is limited to variables by their names (str), not {only!r}")
    if not (names := [n.strip() for n in names if n.strip()]):
        raise BadArgument("no variable named to restore: give one or more names (a,b), or none to restore them all")
    return names


def _plain(outcome: Written) -> list[Any]:
    """A writer's outcome as JSON holds it: a forked writer leaves it in its result file, signed (``ForkWriter``)."""
    manifest, blobs, hashed = outcome
    return [manifest, [[b.key, b.size, b.stored, b.new] for b in blobs.values()], hashed]


def _written(plain: list[Any]) -> Written:
    """A writer's outcome from its ``_plain`` form."""
    return plain[0], result_blobs(plain), [(a, s, k) for a, s, k in plain[2]]

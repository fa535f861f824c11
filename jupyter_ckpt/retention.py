"""Retention: the store stays under its size budget and never takes its disk below a floor of free space.

The budget is the smaller of a share of the filesystem under the store and an
absolute cap; the floor is the smaller of a share of that filesystem and an
absolute amount (a small disk keeps a tenth free, a large one 2 GiB). A disk
also runs out of files (inodes), and each blob is one: the same share of its
files is kept free, at most as many as the floor would need at one file per
16 KiB (ext4's default). Every blob write checks all three
(``blobs.WriteLimit``), so a save that does not fit fails cleanly instead of
filling the disk, and the user can still save a notebook beside the store.

Past the budget, old checkpoints are thinned (``Timeline.thin``: recent ones
dense, older ones sparse, tagged ones and what crash recovery needs never).

A kernel's ``Retention`` does this by itself, in a thread of its own, after a
commit leaves too little room for another checkpoint of the same size: never in
a cell's path.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .blobs import WriteLimit, nearly_full
from .errors import CheckpointError, StoreFullError
from .notice import Notice
from .store import Store
from .timeline import Timeline
from .units import human_bytes


@dataclass(frozen=True)
class Limits:
    """How much of its filesystem a store may use; the options of the same names in ``config.StoreOptions``."""

    max_store_share: float = 0.25
    max_store_size: int | None = 20 << 30
    min_free_share: float = 0.1
    min_free: int = 2 << 30

    def floor(self, disk: int) -> int:
        """The free space a store never takes a filesystem of ``disk`` bytes below: the smaller of the two."""
        return min(int(self.min_free_share * disk), self.min_free)

    def files_floor(self, files: int) -> int:
        """The free files (inodes) a store never takes a filesystem that can hold ``files`` below (0: no limit)."""
        return min(int(self.min_free_share * files), self.min_free // BYTES_PER_FILE)


# ext4's default bytes per inode: the floor of free space, counted in files.
BYTES_PER_FILE = 16 << 10


@dataclass(frozen=True)
class Usage:
    """A store's size against its budget, and the free space of its filesystem against the floor."""

    size: int
    budget: int
    free: int
    floor: int
    why: str  # what sets the budget, in the user's words
    files_free: int = 0  # files (inodes) the filesystem can still make, where it counts them
    files_floor: int = 0  # the free files always left: 0 where the filesystem sets no limit (btrfs)

    @property
    def floor_binds(self) -> bool:
        """Whether the floor of free space, not the budget, is what limits the store now."""
        return self.size + self.free - self.floor < self.budget

    @property
    def allowed(self) -> int:
        """The most the store may hold now: its budget, or less where the disk is nearly full."""
        return max(0, min(self.budget, self.size + self.free - self.floor))

    def files_short(self, files: int = 0) -> int:
        """How many files the store must free so that ``files`` more leave the floor of free files."""
        return max(0, self.files_floor + files - self.files_free) if self.files_floor else 0

    def describe(self) -> str:
        """``1.2 GiB of a 5.0 GiB budget (…); 40.0 GiB free on the disk, at least 2.0 GiB always left``, and the
        files where they run short."""
        described = (
            f"{human_bytes(self.size)} of a {human_bytes(self.budget)} budget ({self.why}); "
            f"{human_bytes(self.free)} free on its disk, at least {human_bytes(self.floor)} always left"
        )
        if self.files_short(self.files_floor):  # within the floor again of it: worth saying
            described += f"; {self.files_free} files (inodes) free there, at least {self.files_floor} always left"
        return described

    def as_dict(self) -> dict[str, int | str]:
        return {
            "size": self.size,
            "budget": self.budget,
            "free": self.free,
            "floor": self.floor,
            "why": self.why,
            "files_free": self.files_free,
            "files_floor": self.files_floor,
        }


def usage(store: Store, limits: Limits, size: int | None = None) -> Usage:
    """Where ``store`` stands against ``limits`` (``size``: the store's size, if the caller knows it)."""
    store.revive()  # removed while in use: the new one's
    st = os.statvfs(store.root)
    disk = st.f_blocks * st.f_frsize
    share = int(limits.max_store_share * disk)
    if limits.max_store_size is not None and limits.max_store_size < share:
        budget, why = limits.max_store_size, "max_store_size"
    else:
        budget, why = share, f"max_store_share {limits.max_store_share:.0%} of its {human_bytes(disk)} filesystem"
    return Usage(
        store.size() if size is None else size,
        budget,
        st.f_bavail * st.f_frsize,
        limits.floor(disk),
        why,
        st.f_favail,
        limits.files_floor(st.f_files),
    )


# What no thinning takes, as a store that cannot make room says it (``timeline.never_thinned``).
NEVER_THINNED = "tagged checkpoints, and each notebook's and each running kernel's newest good states, stay"
# Seconds between two readings of the store's size while the kernel is idle: other kernels write to it too.
MEASURE_EVERY = 5.0


class Retention:
    """Keeps one kernel's store under its budget: the limit each save writes under, and thinning after commits.

    Thinning runs in a thread of its own, one pass at a time, over every session of
    the store (the budget is the store's); ``protect`` names what the kernel needs
    kept besides ``timeline.never_thinned`` (its head). ``notify`` is told once when even the
    newest checkpoint cannot fit (until a pass finds room again).
    """

    def __init__(
        self,
        store: Store,
        limits: Limits,
        protect: Callable[[], set[int]],
        notify: Callable[[str], None],
    ) -> None:
        self.store = store
        self.timeline = Timeline(store)
        self.limits = limits
        self._protect = protect
        self._notify = notify
        self._size = store.size()  # kept up to date by commits and passes, so a save need not sum the catalog
        self._measured = time.monotonic()  # when ``_size`` was last read from the store (``idle``)
        self._lock = threading.Lock()
        self._wanted = threading.Event()
        self._need = 0  # bytes the next checkpoint is expected to write
        self._need_files = 0  # and files
        self._worker: threading.Thread | None = None
        self._retry: Callable[[], None] | None = None  # the failed save to take again once there is room
        self._dirty = False  # blobs nothing references may be left (a failed save; a pass beside a save)
        self._too_big = Notice(notify)  # said once, until a pass makes room again
        self._told = False  # that a checkpoint could not fit was said since the last commit
        self.error: str | None = None  # why the last pass failed

    def usage(self) -> Usage:
        return usage(self.store, self.limits, self._size)

    def limit(self, pending: int = 0) -> WriteLimit:
        """What a save may write: the room under the budget (less the bytes ``pending``, what writes still running
        are expected to take), and the floor of free space."""
        u = self.usage()
        if u.floor_binds:
            full = nearly_full(self.store.root, u.floor)
        else:
            full = f"the checkpoint store is at its size budget ({human_bytes(u.budget)}, {u.why})"
        return WriteLimit(max(0, u.allowed - u.size - pending), u.floor, u.files_floor, full)

    def committed(self, new_bytes: int, new_files: int = 0) -> bool:
        """A checkpoint took ``new_bytes`` in ``new_files`` blob files: thin in the background unless another of
        its size still fits. Returns whether the user was told since the last commit that a checkpoint could not
        fit."""
        with self._lock:
            self._size += new_bytes
            # Files, at most: each new blob's, its directory's (``ab/``) if it is the first there, the writer's result.
            self._need, self._need_files = new_bytes, 2 * new_files + 1
            told, self._told = self._told, False
        u = self.usage()
        if u.allowed - u.size < new_bytes or u.files_short(self._need_files):
            self._start()
        return told

    def measure(self) -> None:
        """Measure the store again, and thin it in the background if it is past what it may hold: blob files came
        from elsewhere (a checkpoint fetched from the remote store), or other kernels wrote to it (``idle``)."""
        u = usage(self.store, self.limits)
        with self._lock:
            self._size, self._measured = u.size, time.monotonic()
        if u.size > u.allowed or u.files_short():
            self._start()

    def failed(self, needed: int, retry: Callable[[], None] | None) -> None:
        """A save failed, leaving blobs no checkpoint references: collect them in the background. If it ran
        out of room (``retry`` given), make room for about ``needed`` bytes too, then ``retry`` it if it fits
        now (once: a save that cannot fit is not tried again until the next commit)."""
        with self._lock:
            self._need = max(self._need, needed)
            self._retry = retry
            self._dirty = True
        self._start()

    def idle(self) -> None:
        """No save of this kernel is in progress: collect what failed saves left, which a gc keeps while a save
        that began before them is in progress (``Store.gc``); and measure the store again, which other kernels
        write to as well, thinning it if they took it past its budget."""
        if self._dirty:
            self._start()
        if time.monotonic() - self._measured >= MEASURE_EVERY:  # at a cell's start too: not a query every time
            self.measure()

    def _start(self) -> None:
        self._wanted.set()
        with self._lock:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name="jupyter-ckpt-retention", daemon=True)
                self._worker.start()

    def settle(self) -> None:
        """Wait for the thinning in progress, if any (tests, and ``%checkpoint gc``)."""
        worker = self._worker
        if worker is not None:
            worker.join()

    def _work(self) -> None:
        while self._wanted.is_set():
            self._wanted.clear()
            try:
                self._pass()
                self.error = None
            except CheckpointError as e:  # the catalog is busy or damaged: the next commit tries again
                self.error = str(e)
            except FileNotFoundError as e:  # the store was removed during the pass: the next commit makes it again
                self.error = f"the checkpoint store was removed while it was thinned: {e}"

    def _make_room(self, need: int, need_files: int) -> bool:
        """Collect, then thin until ``need`` more bytes in ``need_files`` more files fit: whether they do."""
        self.store.gc()  # what no checkpoint references goes, and the catalog's log is truncated (thin does after)
        while True:  # the kernel may commit meanwhile: thin again until it fits, or nothing is left to thin
            now = usage(self.store, self.limits)
            target = max(0, now.allowed - need)
            short = now.files_short(need_files)
            if now.size <= target and not short:
                return True
            sessions = [s["key"] for s in self.store.sessions()]
            # Thinning counts the blobs checkpoints reference; the catalog takes its share of the store too.
            blobs_target = max(0, target - self.store.catalog_size())
            if short:  # as many bytes fewer as the files to free are of the blob files there are, and some
                files, referenced = len(self.store.blobs.listing()), self.store.referenced_size()
                blobs_target = min(blobs_target, referenced * max(0, files - short) // max(files, 1), referenced - 1)
            protect = self._protect()  # the kernel's head: the session whose next checkpoint needs the room
            pending = {self.store.get(c).session for c in protect if self.store.exists(c)} if need else set()
            if not self.timeline.thin(sessions, target=blobs_target, protect=protect, pending=pending).checkpoints:
                return False

    def _pass(self) -> None:
        with self._lock:
            need, need_files = self._need, max(self._need_files, 1)  # a save refused for want of files needed one
            self._dirty = False
        # Saves in progress keep what was written since they began: collect it once they are done (``idle``).
        held = self.store.blobs.oldest_lease() is not None
        try:
            fits = self._make_room(need, need_files)
        except StoreFullError:  # the disk has no room even for the catalog's log, to delete: said below all the same
            fits = False
        after = usage(self.store, self.limits)
        with self._lock:
            self._size = after.size
            self._dirty = self._dirty or held
            retry, self._retry = self._retry, None
        if fits:
            with self._lock:
                self._too_big.clear()  # said again if it happens again
            if retry is not None:
                retry()
        elif retry is not None and after.files_short(need_files):  # files, not bytes, ran out
            message = (
                f"jupyter-ckpt: the newest checkpoint needs about {need_files} files, but the disk under the store "
                f"has {after.files_free} files (inodes) free and jupyter-ckpt always leaves {after.files_floor}. "
                f"Everything it may thin is thinned ({NEVER_THINNED}). "
                "Delete files on that disk, or tagged checkpoints."
            )
            with self._lock:
                self._told = self._too_big.tell(message, reason="too many files") or self._told
        elif retry is not None:  # a save did fail for want of room (not a guess after a commit that still fitted)
            if after.floor_binds:  # a larger budget would not help
                advice = (
                    "Free disk space, lower c.Checkpoints.min_free or min_free_share, or delete tagged checkpoints."
                )
            else:
                advice = (
                    "Raise c.Checkpoints.max_store_size or max_store_share, delete tagged checkpoints, or free space."
                )
            message = (
                f"jupyter-ckpt: the newest checkpoint needs about {human_bytes(need)}, but the store can take only "
                f"{human_bytes(max(0, after.allowed - after.size))} more: {after.describe()}. Everything it may "
                f"thin is thinned ({NEVER_THINNED}). {advice}"
            )
            with self._lock:
                self._told = self._too_big.tell(message, reason="too big") or self._told

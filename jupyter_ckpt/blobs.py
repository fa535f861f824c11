"""Blob storage: signed, content-addressed blob files, in a local directory or an object store.

A blob file is a fixed header followed by the payload::

    magic "JCKPBLOB" | version u8 | codec u8 | reserved u16 | header size u32 |
    payload size u64 | HMAC-SHA256(key + codec + payload) | padding to header size

Compressed blobs (zstd level 1) have a 64-byte header; raw blobs (numeric
buffers that do not compress) a 4096-byte one, so the payload is page-aligned
and a restore reads it straight into the array's memory, with no copy between.
An array's bytes are shuffled before zstd (codecs 2-5, below), and such a blob
says version 2 in its header, so that a version that cannot decode it refuses it;
every other blob says 1. The key is the xxh3-128 of the content (never of the
shuffled or compressed bytes), so equal content is one blob, written once.

The file is the same wherever it is kept: ``LocalBlobs`` (the fast tier, a
directory) and ``remote.RemoteBlobs`` (an object store) both implement
``BlobStorage``, and moving a blob between them copies its bytes unchanged.
A file is made visible only when complete (temp file, fsync, rename here; one
PUT there), and nothing is returned from one before its signature checks out.
Here the files of one checkpoint are written as a ``Batch``: each file's writeback
starts as soon as it is written, and the fsyncs and renames come together at the end.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import hmac
import io
import mmap
import os
import re
import struct
import threading
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISDIR, S_ISREG
from types import TracebackType
from typing import NoReturn, Protocol

import xxhash
import zstandard

from .errors import BadArgument, CheckpointError, IntegrityError, StoreFullError, StoreVersionError
from .manifest import FORMAT_VERSION
from .permissions import check_not_link, check_private
from .processes import owner, owner_alive
from .units import human_bytes

MAGIC = b"JCKPBLOB"
_HEADER = struct.Struct("<8sBBHIQ32s")  # 56 bytes
_SMALL_HEADER = 64
_PAGE = mmap.PAGESIZE
HEADER_MAX = _PAGE  # the most bytes a blob file's header takes
CODEC_RAW = 0
CODEC_ZSTD = 1
# zstd over an array's bytes regrouped by their place in the item (the byte shuffle of HDF5 and Blosc): the
# high bytes of small integers and the sign and exponent bytes of floats line up in long runs, which zstd
# takes smaller and faster than the same bytes unshuffled (docs/design.md, Write). Item size -> codec.
CODEC_SHUFFLED = {2: 2, 4: 3, 8: 4, 16: 5}
_ITEM_SIZE = {codec: size for size, codec in CODEC_SHUFFLED.items()}
# The version a shuffled blob says in its header (others say FORMAT_VERSION), and the highest one read here.
BLOB_VERSION = 2
# Compress only when it pays: keep the raw bytes unless zstd saves a tenth; an array's chunk, a fifth, since
# kept raw it costs no compression to write or read and a lazy restore can map it (random doubles, which
# shuffled zstd takes to 0.84, stay raw).
_MIN_RATIO = 0.9
_MIN_RATIO_SHUFFLED = 0.8
_KEY = re.compile(r"^[0-9a-f]{32}$")
# A checkpoint writer's result, in ``tmp/``, left for its kernel to commit.
RESULT = re.compile(r"result\.[^/]*\.json")
# The start of the name of a kernel's mark that it restores a state as it starts (``extension.CellHooks._restoring``):
# one a dead kernel left is for the next kernel on its notebook to find (the state may have killed it), not a gc.
RESTORING = "start-restore."
# Bytes other writes may have under way beside one that checks the floor of free space: two writers, each
# with a few threads writing 4 MiB chunks. The floor is kept with this much to spare (at most the floor
# again, on a small disk).
_IN_FLIGHT = 32 << 20
TMP = "checkpoint store's directory of blobs being written"
# Files a batch holds open, written and not yet fsynced, before the writer that adds the next syncs them all.
_BATCH_OPEN = 64


@dataclass(frozen=True)
class BlobInfo:
    """A blob as the catalog knows it: content size and bytes on disk."""

    key: str
    size: int
    stored: int
    new: bool


@dataclass
class WriteLimit:
    """What this process's writes may take: bytes under the store's budget, and free space always left.

    Set before each save (``retention.Retention.limit``); a forked writer takes its own copy.
    """

    room: int | None = None  # None: no budget
    keep_free: int = 0
    keep_files: int = 0  # files (inodes) always left free: each blob is a file
    full: str = "the checkpoint store is at its size budget"  # why a write past ``room`` is refused


def nearly_full(root: Path, floor: int) -> str:
    """Why a write that would take the disk under ``root`` below its floor of free space is refused."""
    return f"the disk under {root} is nearly full: jupyter-ckpt always leaves {human_bytes(floor)} free there"


def nearly_out_of_files(root: Path, floor: int) -> str:
    """Why a blob file that would take the disk under ``root`` below its floor of free files (inodes) is refused."""
    return f"the disk under {root} is nearly out of files (inodes): jupyter-ckpt always leaves {floor} free there"


@dataclass(frozen=True)
class BlobStat:
    """A blob file as its storage lists it: bytes, and when it was written (seconds since the epoch)."""

    size: int
    modified: float


class BlobStorage(Protocol):
    """Where blob files are kept: the files themselves, byte for byte, by key."""

    def has(self, key: str) -> bool: ...

    def read_file(self, key: str, most: int | None = None) -> bytes:
        """The whole blob file (header and payload), unverified; IntegrityError, unread, if longer than ``most``."""
        ...

    def write_file(self, key: str, source: bytes | Path) -> None:
        """Make a complete blob file visible under ``key`` (from its bytes or a local file holding them)."""
        ...

    def delete(self, key: str) -> None: ...

    def listing(self) -> dict[str, BlobStat]: ...


def content_key(data: bytes | memoryview) -> str:
    """The content address of a blob: xxh3-128, hex."""
    return xxhash.xxh3_128_hexdigest(data)


_scratch = threading.local()


def _shuffle(view: memoryview, itemsize: int) -> memoryview:
    """The bytes of ``view``'s items grouped by their place in the item: every first byte, every second, ...

    Into a buffer this thread keeps for the purpose, valid until its next call: a fresh one every chunk
    made the shuffle half as fast (a page fault for each of its pages).
    """
    import numpy  # only arrays have items to shuffle, so numpy is here

    buffer = getattr(_scratch, "shuffled", None)
    if buffer is None or buffer.nbytes < view.nbytes:
        buffer = _scratch.shuffled = numpy.empty(view.nbytes, numpy.uint8)
    shuffled = buffer[: view.nbytes].reshape(itemsize, -1)
    shuffled[...] = numpy.frombuffer(view, numpy.uint8).reshape(-1, itemsize).T
    return shuffled.data.cast("B")


def _unshuffle(shuffled: memoryview, itemsize: int, into: memoryview) -> None:
    import numpy

    target = numpy.frombuffer(into, numpy.uint8).reshape(-1, itemsize)
    target[...] = numpy.frombuffer(shuffled, numpy.uint8).reshape(itemsize, -1).T


def longer_than(key: str, most: int) -> IntegrityError:
    """The refusal of a blob file longer than its checkpoint says it can be."""
    return IntegrityError(f"blob {key} is longer than its checkpoint says it can be ({most} bytes); it was not read")


def check_key(key: str) -> str:
    if not _KEY.match(key):
        raise IntegrityError(f"malformed blob key {key!r}")
    return key


def make_dir(path: Path) -> None:
    """Create a directory 0700 if it is missing; one that exists keeps its mode (``permissions.py`` refuses it
    if others can write it)."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # it said "File exists", or "Not a directory"
        file = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), path)
        raise BadArgument(
            f"cannot keep checkpoints in {path}: {'it' if file == path else file} is a file, not a directory"
        ) from None
    except OSError as e:
        raise BadArgument(f"cannot keep checkpoints in {path}: {e.strerror or e}") from None


_SYNC_FILE_RANGE_WRITE = 2
_sync_file_range = getattr(ctypes.CDLL(None, use_errno=True), "sync_file_range", None)
if _sync_file_range is not None:
    _sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]


def _start_writeback(fd: int) -> None:
    """Have the kernel begin writing a file's dirty pages to disk now, without waiting for them (Linux's
    ``sync_file_range``; elsewhere they go when the fsync asks). Only a hint: the fsync still says whether
    they arrived."""
    if _sync_file_range is not None:
        _sync_file_range(fd, 0, 0, _SYNC_FILE_RANGE_WRITE)


class Batch:
    """Blob files written together and made durable together: ``LocalBlobs.batch()``, whose ``put`` is a
    ``capture.Put`` that any number of threads may call.

    Each file goes to a temp file named after this process and thread, and its
    writeback starts at once; when the batch ends (or ``_BATCH_OPEN`` files wait)
    they are fsynced, then renamed into place. Until then none is visible, and a
    batch that ends in an error deletes what it wrote. An fsync per file as it
    was written left each thread waiting on its own file's writeback, and made 1 GiB
    of random doubles take two fifths longer to write (benchmarks/README.md, Throughput).
    """

    def __init__(self, blobs: LocalBlobs, what: str) -> None:
        self._blobs = blobs
        self._what = what  # the message's word for what failed: "written", "fetched"
        self._lock = threading.Lock()
        self._waiting: list[tuple[int, Path, Path]] = []  # descriptor, temp file, final path
        self.known: dict[str, BlobInfo] = {}  # the blobs put in this batch: the same content again is not written

    def put(self, data: bytes | memoryview, compress: bool = True, itemsize: int = 1) -> BlobInfo:
        return self._blobs.put(data, compress, itemsize, self)

    def write(self, key: str, parts: list[bytes | memoryview]) -> None:
        path = self._blobs.path(key)
        tmp = self._blobs.tmp / f"{key}.{owner()}.{threading.get_ident()}"
        try:
            path.parent.mkdir(mode=0o700, exist_ok=True)
            fd = self._create(tmp)
        except OSError as e:
            self._raise(e)
        written = (fd, tmp, path)
        try:
            for part in parts:
                view = memoryview(part)
                while view:
                    view = view[os.write(fd, view) :]
            _start_writeback(fd)
        except OSError as e:
            self._discard([written])
            self._raise(e)
        full: list[tuple[int, Path, Path]] = []
        with self._lock:
            self._waiting.append(written)  # complete: another thread may sync and rename it from here on
            if len(self._waiting) >= _BATCH_OPEN:
                full, self._waiting = self._waiting, []
        self._sync(full)

    def _create(self, tmp: Path) -> int:
        """Open a new temp file; in a process out of file descriptors, sync (and so close) those waiting first.
        Whatever has its name (a file of a writer whose pid this process has now, a link put there) is replaced:
        a link is never written through."""
        tmp.unlink(missing_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        try:
            return os.open(tmp, flags, 0o600)
        except OSError as e:
            if e.errno != errno.EMFILE:
                raise
        self._sync(self._take())
        return os.open(tmp, flags, 0o600)

    def _take(self) -> list[tuple[int, Path, Path]]:
        """The files waiting, which this thread now syncs or discards."""
        with self._lock:
            waiting, self._waiting = self._waiting, []
        return waiting

    def __enter__(self) -> Batch:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if error is None:
            self._sync(self._take())
        else:
            self._discard(self._take())

    def _sync(self, files: list[tuple[int, Path, Path]]) -> None:
        try:
            for fd, _, _ in files:
                os.fsync(fd)
            for _, tmp, path in files:
                os.replace(tmp, path)
        except OSError as e:
            self._discard(files)
            self._raise(e)
        for fd, _, _ in files:
            os.close(fd)

    @staticmethod
    def _discard(files: list[tuple[int, Path, Path]]) -> None:
        for fd, tmp, _ in files:
            with contextlib.suppress(OSError):
                os.close(fd)
            with contextlib.suppress(OSError):
                tmp.unlink()

    def _raise(self, e: OSError) -> NoReturn:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            full = f"the disk under {self._blobs.root} is full; the checkpoint was not {self._what}"
            raise StoreFullError(full) from e
        raise e


class _Held(io.BytesIO):
    """A fetched blob file held in memory, read as a file: its payload is copied out with the GIL released
    (``ctypes.memmove``), as a file's read releases it, so the chunks of one buffer are copied on every core
    while the other threads run."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)  # shares the bytes: the header is read through it
        self._data = data

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        start = self.tell()
        n = max(0, min(buffer.nbytes, len(self._data) - start))
        if n:
            target = (ctypes.c_char * n).from_buffer(buffer)
            source = ctypes.cast(ctypes.c_char_p(self._data), ctypes.c_void_p).value or 0
            ctypes.memmove(target, source + start, n)
            del target  # let go of the export, so the buffer can be released
        self.seek(start + n)
        return n


class LocalBlobs:
    """Blob files in a directory: ``ab/<key>``, and ``tmp/`` for files being written."""

    def __init__(self, root: Path, secret: bytes, *, create: bool) -> None:
        self.root = root
        self.tmp = root / "tmp"
        self._secret = secret
        self.limit = WriteLimit()
        self._room_lock = threading.Lock()
        # Blob files fetched from elsewhere and checked, held in memory until written here (``hold_fetched``).
        self._fetched: dict[str, bytes] = {}
        # Blob files on their way from elsewhere (``fetching``): a read of one waits for it, or for its failure.
        self._fetching: dict[str, Future[None]] = {}
        # The blobs this process knows are sound here (written by it, checked by ``_sound``, or committed by its
        # kernel from a writer that checked them): not checked again each time a checkpoint uses them.
        self._sound_keys: set[str] = set()
        if create:
            make_dir(self.root)
            make_dir(self.tmp)
        check_not_link(self.root, "checkpoint store's blob directory")
        check_not_link(self.tmp, TMP)
        check_private(self.root, "checkpoint store's blob directory")
        check_private(self.tmp, TMP)

    def path(self, key: str) -> Path:
        return self.root / key[:2] / check_key(key)

    def _mac(self, key: str, codec: int, payload: bytes | memoryview) -> bytes:
        h = hmac.new(self._secret, key.encode() + bytes([codec]), hashlib.sha256)
        h.update(payload)
        return h.digest()

    # -- BlobStorage -----------------------------------------------------------

    def has(self, key: str) -> bool:
        return key in self._fetched or key in self._fetching or self.path(key).exists()

    def read_file(self, key: str, most: int | None = None) -> bytes:
        with self._open(key) as f:
            if most is not None and os.fstat(f.fileno()).st_size > most:
                raise longer_than(key, most)
            return f.read()

    def write_file(self, key: str, source: bytes | Path) -> None:
        """Place a blob file (fetched from elsewhere) once its header and signature check out here."""
        data = source.read_bytes() if isinstance(source, Path) else source
        self.check_file(key, data)
        self._write_fetched({key: data})

    def check_file(self, key: str, data: bytes) -> None:
        """Check a whole blob file's header and signature, without decoding it; raises IntegrityError."""
        codec, _, length, mac = self._header(key, io.BytesIO(data), len(data))
        if not hmac.compare_digest(mac, self._mac(key, codec, memoryview(data)[len(data) - length :])):
            raise IntegrityError(f"blob {key} fails its signature check: it was modified after it was written")

    def fetching(self, futures: dict[str, Future[None]]) -> None:
        """Blob files being fetched from elsewhere, each done once it is held (``hold_fetched``) or written here: until
        then a read of one waits for it, and raises what its fetch raised."""
        self._fetching.update(futures)

    def _arrived(self, key: str) -> None:
        future = self._fetching.get(key)
        if future is not None:
            future.result()

    def hold_fetched(self, key: str, data: bytes) -> None:
        """Serve a blob file fetched from elsewhere from memory, once checked, until ``write_fetched``."""
        self.check_file(key, data)
        self._fetched[key] = data

    def write_fetched(self, keys: list[str]) -> dict[str, tuple[int, int]]:
        """Write blob files held by ``hold_fetched`` here, together, and let go of them; returns their sizes."""
        held = {key: self._fetched[key] for key in keys}
        self._write_fetched(held)
        for key in keys:
            del self._fetched[key]  # only now: until its file is in place, a reader finds it here
            self._fetching.pop(key, None)
        return {key: self.sizes(data) for key, data in held.items()}

    def _write_fetched(self, files: dict[str, bytes]) -> None:
        self.keep_free(sum(len(data) for data in files.values()), "the checkpoint was not fetched", len(files))
        with self.batch("fetched") as batch:
            for key, data in files.items():
                batch.write(key, [data])

    def drop_fetched(self) -> None:
        """Let go of the fetched blob files held in memory and not written, and of those still expected."""
        self._fetched.clear()
        self._fetching.clear()

    def delete(self, key: str) -> None:
        self.path(key).unlink(missing_ok=True)

    def collect(self, key: str, cutoff: float) -> int | None:
        """Delete an unreferenced blob file unless it was used since ``cutoff``; returns its size if deleted.

        A save that reuses a blob touches it (``put``), maybe after a gc listed it as old: the file is moved
        aside first, so that a touch after that fails and the save writes it again, and its time is read
        there, so that a touch before it keeps it.
        """
        path = self.path(key)
        aside = self.tmp / f"gc.{owner()}.{key}"
        try:
            os.rename(path, aside)
        except FileNotFoundError:
            return None
        stat = aside.stat()
        if stat.st_mtime >= cutoff:
            os.rename(aside, path)  # used again: back (the same bytes as any copy written meanwhile)
            return None
        aside.unlink()
        return stat.st_size

    def listing(self) -> dict[str, BlobStat]:
        """Every blob file's size and time, by key. Left out: a file another gc collected since its directory was
        read (it failed this one: "cannot read ... No such file or directory", exit 3, as for a damaged store),
        and a file that is no blob by its name (a file browser's ``.DS_Store``), which is not this store's to
        collect (it failed every gc: "malformed blob key")."""
        found = {}
        for sub in self.root.iterdir():
            if sub != self.tmp and sub.is_dir():
                for path in sub.iterdir():
                    if _KEY.match(path.name):
                        with contextlib.suppress(FileNotFoundError):
                            st = path.stat()
                            found[path.name] = BlobStat(st.st_size, st.st_mtime)
        return found

    # -- writing -----------------------------------------------------------------

    def batch(self, what: str = "written") -> Batch:
        """Blob files to write together, durable and visible when the ``with`` block ends (``Batch``)."""
        return Batch(self, what)

    def put(
        self, data: bytes | memoryview, compress: bool = True, itemsize: int = 1, batch: Batch | None = None
    ) -> BlobInfo:
        """Encode and write one blob unless it is here already; returns its key and sizes.

        ``itemsize``: the size of the array items ``data`` holds, whose bytes are shuffled before they are
        compressed (2, 4, 8 or 16; any other size compresses them as they are). Durable on return, or
        when ``batch`` ends.
        """
        if batch is None:
            with self.batch() as batch:
                return self.put(data, compress, itemsize, batch)
        view = memoryview(data).cast("B")
        key = content_key(view)
        if key in batch.known:
            return batch.known[key]
        path = self.path(key)
        if (size := self._sound(key, path)) is not None:
            with contextlib.suppress(FileNotFoundError):  # collected since: written again below
                os.utime(path)  # used again: a gc running now keeps it (Store.gc)
                return BlobInfo(key, len(view), size, new=False)
        codec, payload = CODEC_RAW, view
        if compress:
            trial = CODEC_SHUFFLED.get(itemsize, CODEC_ZSTD) if len(view) % itemsize == 0 else CODEC_ZSTD
            shuffled = trial in _ITEM_SIZE
            # One compressor per call: they are not thread-safe.
            packed = zstandard.ZstdCompressor(level=1).compress(_shuffle(view, itemsize) if shuffled else view)
            if len(packed) < (_MIN_RATIO_SHUFFLED if shuffled else _MIN_RATIO) * len(view):
                codec, payload = trial, memoryview(packed)
        header_size = _PAGE if codec == CODEC_RAW and len(view) >= _PAGE else _SMALL_HEADER
        version = BLOB_VERSION if codec in _ITEM_SIZE else FORMAT_VERSION
        header = _HEADER.pack(MAGIC, version, codec, 0, header_size, len(payload), self._mac(key, codec, payload))
        self._claim(header_size + len(payload))
        batch.write(key, [header + b"\0" * (header_size - len(header)), payload])
        info = batch.known[key] = BlobInfo(key, len(view), header_size + len(payload), new=True)
        self._sound_keys.add(key)  # if the batch fails, the file is missing, and written again next time
        return info

    def _sound(self, key: str, path: Path) -> int | None:
        """The size of the file the blob ``key`` has here, if it may be used again: a file (not a link) whose header
        matches its size, and, when it is small, whose signature checks out. None: there is none, or it is to be
        written over. A small value (``x = 1``) has a key anyone can compute, and a file planted under it would
        otherwise be taken for it by every checkpoint holding the value, all of them then refused."""
        try:
            if key in self._sound_keys:
                return path.stat().st_size
            if path.is_symlink():
                return None
            with self._open(key) as f:
                size = os.fstat(f.fileno()).st_size
                if size > _PAGE:  # an array's chunk: its header only, or every checkpoint would read them all
                    self._header(key, f, size)
                else:
                    self.check_file(key, f.read())
        except (CheckpointError, FileNotFoundError):
            return None
        self._sound_keys.add(key)
        return size

    def known_sound(self, keys: Iterable[str]) -> None:
        """Blobs a checkpoint committed in this process uses: written or checked (``_sound``) by its writer, maybe
        a forked child whose own record of them is gone."""
        self._sound_keys.update(keys)

    def _claim(self, nbytes: int) -> None:
        """Take ``nbytes`` of the room under the store's budget; raise StoreFullError past it or the floor."""
        with self._room_lock:
            room = self.limit.room
            if room is not None and nbytes > room:
                raise StoreFullError(f"{self.limit.full}; the checkpoint was not written")
            if room is not None:
                self.limit.room = room - nbytes
        self.keep_free(nbytes, "the checkpoint was not written", 1)

    def keep_free(self, nbytes: int, outcome: str, files: int = 0) -> None:
        """Refuse a write of ``nbytes`` in ``files`` new files that would take the filesystem under the store below
        its floor of free space or of free files, saying the ``outcome`` (what was not done)."""
        if not (self.limit.keep_free or self.limit.keep_files):
            return
        st = os.statvfs(self.root)
        spare = min(_IN_FLIGHT, self.limit.keep_free)
        if st.f_bavail * st.f_frsize - nbytes - spare < self.limit.keep_free:
            raise StoreFullError(f"{nearly_full(self.root, self.limit.keep_free)}; {outcome}")
        if files and st.f_files and st.f_favail - files < self.limit.keep_files:
            raise StoreFullError(f"{nearly_out_of_files(self.root, self.limit.keep_files)}; {outcome}")

    def hold(self, since: float) -> None:
        """Tell every gc that this process has saves in progress, the oldest begun at ``since`` (seconds since
        the epoch): blobs written or used again since then stay until ``release`` (``Store.gc``)."""
        lease = self._lease(owner())
        lease.touch(mode=0o600)
        os.utime(lease, (since, since))

    def _lease(self, who: str) -> Path:
        """The lease of the process ``who`` (``processes.owner``: its pid, start time and where it runs), signed with
        the store's secret, so that one left by a process whose pid another has now, or one put there by hand, holds
        nothing. In its name, not in the file: a lease is taken on a disk too full for a byte more."""
        mac = hmac.new(self._secret, f"lease {who}".encode(), hashlib.sha256).hexdigest()[:32]
        return self.tmp / f"lease.{who}.{mac}"

    def release(self) -> None:
        """This process's saves are all committed (or failed)."""
        with contextlib.suppress(OSError):  # missing, or a store gone read-only: a lease never taken
            self._lease(owner()).unlink()

    def oldest_lease(self) -> float | None:
        """When the oldest save still in progress began, or None: of the leases that prove their process lives
        (its pid and start time, or a process elsewhere whose lease is recent, signed: not a lease left by a process
        whose pid another has now, nor one put there), and of the writers' results not committed yet, each dated
        when its writer began."""
        times = []
        for lease in self.tmp.glob("lease.*"):
            with contextlib.suppress(OSError):  # released meanwhile
                made = lease.stat().st_mtime
                who = lease.name.split(".")[1]
                if owner_alive(lease.name, made) and hmac.compare_digest(lease.name, self._lease(who).name):
                    times.append(made)
        for result in self.tmp.glob("result.*.json"):
            with contextlib.suppress(FileNotFoundError):  # committed meanwhile
                times.append(result.stat().st_mtime)
        return min(times, default=None)

    def clean_tmp(self) -> tuple[int, int]:
        """Delete the temp files of writers that are gone; returns (files, bytes). A blob a gc that is gone had
        moved aside (``collect``) goes back instead: a save may have committed a checkpoint that uses it since.
        Read and deleted through the directory itself, never through a link put in its place since the store was
        opened (a subdirectory is not one of them)."""
        check_not_link(self.tmp, TMP)
        count = freed = 0
        fd = os.open(self.tmp, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            for name in os.listdir(fd):
                with contextlib.suppress(FileNotFoundError):  # a writer's, renamed into place meanwhile
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    # A writer's result is committed by its kernel or, if that died, adopted (``writer.adopt``).
                    kept = RESULT.fullmatch(name) or name.startswith(RESTORING)
                    if not owner_alive(name, st.st_mtime) and not S_ISDIR(st.st_mode) and not kept:
                        back = name.startswith("gc.") and S_ISREG(st.st_mode) and self._put_back(fd, name)
                        os.unlink(name, dir_fd=fd)
                        freed += 0 if back else st.st_size
                        count += not back
        finally:
            os.close(fd)
        return count, freed

    def _put_back(self, fd: int, name: str) -> bool:
        """Link the blob a gc moved aside as ``name`` (in the directory ``fd``) back where it was, unless a save wrote
        it there again meanwhile; whether it is there now."""
        key = name.rpartition(".")[2]
        if not _KEY.match(key):
            return False
        with contextlib.suppress(FileExistsError):
            os.link(name, self.path(key), src_dir_fd=fd, follow_symlinks=False)
        return True

    # -- reading -------------------------------------------------------------------

    def _open(self, key: str) -> io.BufferedReader:
        """A blob file opened for reading; IntegrityError if it is missing or unreadable, or is no file (a named pipe
        in its place made the read wait forever for a writer)."""
        try:
            fd = os.open(self.path(key), os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            raise IntegrityError(f"blob {key} is missing from the store") from None
        except OSError as e:  # no permission, a failing disk: as damaged as a missing one
            raise IntegrityError(f"blob {key} cannot be read: {e.strerror}") from None
        if not S_ISREG(mode := os.fstat(fd).st_mode):  # a directory, a pipe, a device put in its place
            os.close(fd)
            why = os.strerror(errno.EISDIR) if S_ISDIR(mode) else "it is not a file"
            raise IntegrityError(f"blob {key} cannot be read: {why}")
        return open(fd, "rb")

    def _header(self, key: str, f: io.BufferedIOBase, size: int) -> tuple[int, int, int, bytes]:
        """Check a blob file's header against its size: returns codec, header size, payload size and MAC."""
        head = f.read(_HEADER.size)
        if len(head) < _HEADER.size:
            raise IntegrityError(f"blob {key} is truncated")
        magic, version, codec, _, header_size, length, mac = _HEADER.unpack(head)
        if magic != MAGIC:
            raise IntegrityError(f"blob {key} is not a jupyter-ckpt blob")
        if version > BLOB_VERSION:
            raise StoreVersionError(f"blob {key} was written by a newer jupyter-ckpt (format {version})")
        if codec > max(_ITEM_SIZE):
            raise IntegrityError(f"blob {key} has a damaged header")
        if size != header_size + length:
            raise IntegrityError(f"blob {key} is truncated ({size} of {header_size + length} bytes)")
        if header_size not in (_SMALL_HEADER, _PAGE) or f.read(header_size - _HEADER.size).strip(b"\0"):
            raise IntegrityError(f"blob {key} has a damaged header")
        return codec, header_size, length, mac

    def raw_extent(self, key: str) -> tuple[Path, int, int] | None:
        """Where a raw blob's payload lies in its file (path, offset, length), if page-aligned; else None.

        The header is checked, the signature is not: whoever maps the payload
        verifies it with ``read`` afterwards.
        """
        if key in self._fetched or key in self._fetching:
            return None
        with self._open(key) as f:
            codec, header_size, length, _ = self._header(key, f, os.fstat(f.fileno()).st_size)
        if codec != CODEC_RAW or header_size != _PAGE:
            return None
        return self.path(key), header_size, length

    def read(self, key: str, into: memoryview | None = None, size: int | None = None) -> memoryview:
        """The verified content of a blob, read into ``into`` when given (raw blobs go straight there), of ``size``
        bytes when its checkpoint says so (a pickle stream): a file longer than that holds is refused unread.

        Raises IntegrityError, naming the blob, if it is missing, truncated, damaged
        or fails its signature check; nothing is returned before the check. A
        blob held in memory (``hold_fetched``) was checked as it came; one on its way (``fetching``) is waited for.
        """
        self._arrived(key)
        fetched = self._fetched.get(key)
        if fetched is not None:
            return self._read_verified(key, _Held(fetched), into, len(fetched), size, checked=True)
        with self._open(key) as f:
            return self._read_verified(key, f, into, os.fstat(f.fileno()).st_size, size)

    def _read_verified(
        self,
        key: str,
        f: io.BufferedIOBase,
        into: memoryview | None,
        file_size: int,
        size: int | None = None,
        checked: bool = False,
    ) -> memoryview:
        codec, _, length, mac = self._header(key, f, file_size)
        expected = into.nbytes if into is not None else size
        raw = codec == CODEC_RAW and into is not None
        if codec == CODEC_RAW and expected is not None and expected != length:
            raise IntegrityError(f"blob {key} holds {length} bytes where {expected} were expected")
        # Compressed, a blob is shorter than what it holds: a longer one is no blob of this buffer or stream (a file
        # grown sparse to any length), refused before it is read.
        if expected is not None and expected < length:
            raise IntegrityError(f"blob {key} is {length} bytes compressed, more than the {expected} it should hold")
        try:
            payload = into if raw and into is not None else memoryview(bytearray(length))
        except MemoryError:
            raise IntegrityError(f"blob {key} is {length} bytes long, more than this process can hold") from None
        f.readinto(payload)
        if not checked and not hmac.compare_digest(mac, self._mac(key, codec, payload)):
            raise IntegrityError(f"blob {key} fails its signature check: it was modified after it was written")
        if codec == CODEC_RAW:
            return payload
        content = memoryview(zstandard.ZstdDecompressor().decompress(payload, max_output_size=expected or 2**63 - 1))
        if expected is not None and expected != content.nbytes:
            raise IntegrityError(f"blob {key} holds {content.nbytes} bytes where {expected} were expected")
        if codec == CODEC_ZSTD:
            if into is None:
                return content
            into[:] = content
            return into
        target = into if into is not None else memoryview(bytearray(content.nbytes))
        _unshuffle(content, _ITEM_SIZE[codec], target)
        return target

    @staticmethod
    def sizes(data: bytes) -> tuple[int, int]:
        """(payload size, file size) of a blob file whose header checked out."""
        return int(_HEADER.unpack(data[: _HEADER.size])[5]), len(data)

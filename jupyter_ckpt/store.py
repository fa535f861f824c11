"""The local checkpoint store: a SQLite catalog over the blob files of ``blobs.LocalBlobs``.

Layout under the store root (directory mode 0700, files 0600)::

    catalog.sqlite        sessions, checkpoints, cells, blob references (WAL)
    blobs/ab/<key>        one file per blob, named by the xxh3-128 of its content (format: blobs.py)
    blobs/tmp/            blobs being written

A checkpoint is committed in two steps: every blob first (temp file, fsync,
rename), then one catalog transaction that inserts the checkpoint row with its
signed manifest. The row is the commit point: a writer killed before it leaves
only unreferenced blobs, which ``gc`` removes; nothing half-written is visible.

What is signed (HMAC-SHA256 with the per-user secret), so that someone who can
write the catalog but lacks the secret cannot change what a restore or a replay
does unseen:

- each manifest, with its identity inside it (``IDENTITY``: uid, session,
  parent and its uid, trigger, last cell), checked against the row that holds
  it, so a valid manifest copied to another row, session or place in the tree
  is refused;
- each recorded cell (source, count, status, duration, time), chained to the
  cell before it, and the manifest holds the chain's newest link (``history``):
  a cell edited, dropped or put in another order fails the chain.

The catalog also holds the remote tier's tables. This module writes the rows of theirs that change with a
checkpoint, in the same transaction (its uid at ``commit``, a tombstone at ``delete``); what a push, a pull
or a fetch did is recorded by ``remote_catalog.RemoteCatalog``, and ``remote.py`` moves the bytes.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISDIR, S_ISREG
from typing import Any, TypedDict, cast

from .blobs import BlobInfo, LocalBlobs, make_dir
from .errors import (
    BadArgument,
    CheckpointError,
    IntegrityError,
    NoStore,
    StoreBusy,
    StoreFullError,
    StoreReadOnly,
    StoreVersionError,
    UnknownCheckpoint,
    UnknownSession,
)
from .manifest import FORMAT_VERSION, Manifest, new_uid
from .permissions import check_not_link, check_private
from .session import check_label
from .units import human_bytes

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    id INTEGER PRIMARY KEY,
    key TEXT UNIQUE NOT NULL,
    created REAL NOT NULL,
    policy TEXT
);
CREATE TABLE IF NOT EXISTS cells (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions(id),
    prev INTEGER,
    count INTEGER,
    source TEXT NOT NULL,
    status TEXT NOT NULL,
    duration REAL,
    time REAL NOT NULL,
    mac TEXT
);
CREATE TABLE IF NOT EXISTS checkpoints (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions(id),
    parent INTEGER,
    time REAL NOT NULL,
    cell INTEGER,
    last_cell INTEGER,
    trigger TEXT NOT NULL,
    status TEXT NOT NULL,
    tag TEXT,
    message TEXT,
    new_bytes INTEGER NOT NULL,
    total_bytes INTEGER NOT NULL,
    changed TEXT NOT NULL,
    manifest TEXT NOT NULL,
    mac TEXT NOT NULL,
    rmac TEXT,
    UNIQUE (session_id, tag)
);
CREATE INDEX IF NOT EXISTS checkpoints_session ON checkpoints(session_id, id);
CREATE INDEX IF NOT EXISTS checkpoints_parent ON checkpoints(parent);
CREATE TABLE IF NOT EXISTS refs (
    checkpoint_id INTEGER NOT NULL,
    blob TEXT NOT NULL,
    PRIMARY KEY (checkpoint_id, blob)
);
CREATE INDEX IF NOT EXISTS refs_blob ON refs(blob);
CREATE TABLE IF NOT EXISTS blobs (key TEXT PRIMARY KEY, size INTEGER NOT NULL, stored INTEGER NOT NULL);
-- Every checkpoint's global id (its manifest's identity names it) and the remote tier's bookkeeping
-- (remote_catalog.py): whether its record is uploaded and whether its blobs are all here (a checkpoint
-- pulled from the remote is fetched when it is restored).
CREATE TABLE IF NOT EXISTS uids (
    checkpoint_id INTEGER PRIMARY KEY,
    uid TEXT UNIQUE NOT NULL,
    uploaded INTEGER NOT NULL DEFAULT 0,
    local INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS uploaded_blobs (key TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS tombstones (uid TEXT PRIMARY KEY, pushed INTEGER NOT NULL DEFAULT 0);
"""


# How a restore entry's message begins when the restore was the first thing its kernel did.
NEW_KERNEL = "new kernel: "
# What ties a manifest to its row: checked at every read, signed again when the row moves.
IDENTITY = ("uid", "session", "parent", "parent_uid", "trigger", "last_cell")
_IDENTITY_SQL = (
    "SELECT u.uid, s.key AS session, c.parent, p.uid AS parent_uid, c.trigger, c.last_cell FROM checkpoints c "
    "JOIN sessions s ON s.id = c.session_id LEFT JOIN uids u ON u.checkpoint_id = c.id "
    "LEFT JOIN uids p ON p.checkpoint_id = c.parent WHERE c.id=?"
)
# What a damaged policy row is said to be (``Store.policy``, ``checkpointer.Policy.remembered``).
DAMAGED_POLICY = "not one a command sets"
# What a cell's signature covers, with the signature of the cell before it.
CELL_FIELDS = ("count", "source", "status", "duration", "time")


class Cell(TypedDict):
    """One recorded cell as the catalog keeps it: its ``CELL_FIELDS``, and its signature (``mac``), chained to
    that of the cell before it in its lineage (``prev``)."""

    id: int
    session_id: int
    prev: int | None
    count: int | None
    source: str
    status: str
    duration: float | None
    time: float
    mac: str | None


def recorded(cell: Cell) -> dict[str, Any]:
    """A cell as users, and the remote store's records, see it: its ``CELL_FIELDS``."""
    return {k: v for k, v in cell.items() if k in CELL_FIELDS}


@dataclass
class CheckpointRecord:
    """One row of a session's timeline, as ``list()`` and the REST API return it."""

    id: int
    session: str
    parent: int | None
    time: float
    cell: int | None
    trigger: str
    status: str
    tag: str | None
    message: str | None
    new_bytes: int
    total_bytes: int
    changed: list[str]
    # A kernel started here: the session's first checkpoint, or a restore that was a kernel's first act.
    kernel_start: bool

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def __getitem__(self, name: str) -> Any:
        """``record["id"]`` as ``record.id``: a record reads as the REST API's JSON object of it does."""
        if name not in self.__dataclass_fields__:
            raise KeyError(name)
        return getattr(self, name)


# The columns of a checkpoint's row that choose what is restored (``last-good``, ``previous``, ``-N``, a tag, crash
# recovery, thinning), signed with the row's id in ``rmac``: each is written from the signed manifest (``_bind``),
# and a row whose signature fails is read from its manifest instead (``Store._record``). ``new_bytes`` and
# ``total_bytes`` only count.
ROW_FIELDS = (
    "skey",
    "parent",
    "time",
    "cell",
    "last_cell",
    "trigger",
    "status",
    "tag",
    "message",
    "changed",
    "new_bytes",
    "total_bytes",
)
# Bytes of a manifest's text read at most: more than any capture writes (remote.RECORD_MAX holds one whole).
MANIFEST_MAX = 64 << 20
# Bytes of a writer's result read at most (``permissions.read_own_file``): a manifest and the list of its blobs.
RESULT_MAX = 2 * MANIFEST_MAX
_ID = re.compile(r"[0-9]{1,18}")
TAG_MAX = 100
SECRET_MIN = 32  # bytes of key: HMAC-SHA256's own size
SECRET_MAX = 1 << 16  # bytes read of a secret file at most
LOCK_WAIT = 30  # seconds a catalog write waits for another process's to end
# Free bytes under which a disk is too full for SQLite to open the catalog (its log's index is 32 KiB) or grow it.
_ROOM_FOR_THE_LOG = 1 << 20


def parse_id(text: str) -> int | None:
    """A checkpoint id written as ASCII digits (``"12"``), else None; ``"²"`` is a digit to ``str.isdigit``."""
    return int(text) if _ID.fullmatch(text) else None


def check_tag(tag: str) -> str:
    """The one validation of a tag, for every surface: returns it, or raises BadArgument saying why not."""
    check_label(tag, "a tag", TAG_MAX)  # a control character broke the tables that list it
    if parse_id(tag) is not None or tag in ("latest", "last-good", "previous") or re.fullmatch(r"#\d+", tag):
        raise BadArgument(f"{tag!r} cannot be a tag: it would read as a checkpoint reference")
    if tag.startswith("-"):
        raise BadArgument(f"{tag!r} cannot be a tag: it starts with '-', which reads as an option or as steps back")
    return tag


def write_secret(path: Path, key: bytes) -> None:
    """Write a secret that is missing (0600). Written whole under another name, then linked into place: a kernel
    and the server starting at once never read a secret half written, and the first link wins."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key)
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):  # a traceback ending in "No space left on device"
            raise StoreFullError(
                f"the disk under {path.parent} is full: the checkpoint secret could not be written; nothing was "
                "changed. Make room on it."
            ) from None
        raise
    finally:
        tmp.unlink(missing_ok=True)


def load_secret(path: Path, *, create: bool = True) -> bytes:
    """Read the per-user HMAC secret, creating it (0600) on first use unless ``create`` is false.

    An HMAC key is bytes: a file of raw bytes is the key as it is. A file that is text (the hex secret
    written here, or a passphrase) is the key as its stripped text, as it always was: the stores it signed
    keep verifying.
    """
    if not create and not path.is_file():
        raise NoStore(f"no checkpoint secret at {path}: no kernel has written checkpoints with it")
    make_dir(path.parent)
    check_private(path.parent, "directory of the checkpoint secret")
    if not path.exists():
        write_secret(path, secrets.token_hex(32).encode())
    check_private(path, "checkpoint secret", secret=True)
    try:  # not blocking: a named pipe in its place waited for a writer forever
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            if not S_ISREG(mode := os.fstat(f.fileno()).st_mode):  # a directory, a pipe, a device
                why = os.strerror(errno.EISDIR) if S_ISDIR(mode) else "it is not a file"
                raise BadArgument(f"cannot read the checkpoint secret {path}: {why}")
            data = f.read(SECRET_MAX + 1)
    except OSError as e:
        raise BadArgument(f"cannot read the checkpoint secret {path}: {e.strerror or e}") from None
    if len(data) > SECRET_MAX:  # a link to a large file: read whole, it could fill the memory
        raise BadArgument(
            f"the checkpoint secret {path} holds more than {SECRET_MAX} bytes, more than any secret: is it the file "
            "you meant?"
        )
    try:  # text, as this function writes it (hex) or a user did: its characters, without the line end
        key = data.decode().strip().encode()
    except UnicodeDecodeError:  # raw bytes, as `head -c 32 /dev/urandom` makes them
        key = data
    if len(key) < SECRET_MIN:
        raise IntegrityError(
            f"the checkpoint secret {path} holds {len(key)} bytes, fewer than {SECRET_MIN}: write at least "
            f"{SECRET_MIN} random bytes to it (head -c {SECRET_MIN} /dev/urandom), or delete it to have one made"
        )
    return key


def holds_blobs(root: Path) -> bool:
    """Whether the store at ``root`` holds checkpoint data: blob files, each signed with its secret."""
    blobs = root / "blobs"
    return blobs.is_dir() and any(sub.name != "tmp" and sub.is_dir() and any(sub.iterdir()) for sub in blobs.iterdir())


def check_catalog(root: Path, *, create: bool) -> Path:
    """The catalog's path; raise if it is missing or empty where a new one must not be made (``create``
    false, or beside blobs: a new catalog would reference none of them, and the next gc would delete them)."""
    path = root / "catalog.sqlite"
    if path.is_file() and path.stat().st_size > 0:
        return path
    if holds_blobs(root):
        raise IntegrityError(
            f"the catalog {path} is missing or empty, but the store holds checkpoint data; nothing was changed. "
            "Put the catalog back from a backup, or move the store away to start afresh."
        )
    if not create:
        raise NoStore(f"no checkpoint store at {root} (nothing was created)")
    return path


def _row_values(manifest: Manifest) -> dict[str, Any]:
    """The values of a checkpoint row's ``ROW_FIELDS`` that its signed manifest holds (all but the byte counts)."""
    changed = sorted(set(manifest["changed"]) | set(manifest.get("removed", [])))
    return {
        "skey": manifest["session"],
        **{k: manifest.get(k) for k in ("parent", "time", "cell", "last_cell", "trigger", "status", "tag", "message")},
        "changed": json.dumps(changed),
    }


def _differ(manifest: Manifest, identity: dict[str, Any]) -> list[str]:
    """The identity fields a manifest names otherwise than its checkpoint's row."""
    return [k for k in IDENTITY if manifest.get(k) != identity[k]]


class Store:
    """Owner of one store directory: every blob write and catalog transaction goes through here.

    ``create`` (kernels and the server) makes what is missing. Without it (the
    command line) the store must exist, and opening it changes nothing on disk;
    a missing one is reported at the first catalog access (``check_catalog``).
    """

    def __init__(
        self, root: str | os.PathLike[str], secret: bytes, *, create: bool = True, secret_path: Path | None = None
    ) -> None:
        self.root = Path(root)
        self._secret = secret
        self._secret_path = secret_path  # written again with ``secret`` by ``revive`` if it was removed with the store
        self._create = create
        # Told that the store was removed while in use and made again (``revive``): the kernel says so once.
        self.on_revive: Callable[[str], None] = lambda message: None
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._sound_rows: set[tuple[Any, ...]] = set()  # rows whose signature checked out here, whole (``_row_signed``)
        if create:
            make_dir(self.root)
        check_private(self.root, "checkpoint store")
        check_not_link(self.root / "catalog.sqlite", "checkpoint catalog")
        check_private(self.root / "catalog.sqlite", "checkpoint catalog")
        self.blobs = LocalBlobs(self.root / "blobs", secret, create=create)
        if create:
            self._check_version()

    # -- catalog --------------------------------------------------------------

    def revive(self) -> bool:
        """Make a new, empty store in this one's place if its directory was removed while in use (``rm -rf`` of
        it, or of its catalog where no blob is left): True if it did. Every checkpoint it held is gone; the
        kernel's go on in the new one, signed with the same secret (written again if it went with the store).
        A catalog removed beside blobs stays the error ``check_catalog`` says."""
        if not self._create or (self.root / "catalog.sqlite").is_file():
            return False
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            make_dir(self.root)
            make_dir(self.blobs.tmp)
            if self._secret_path is not None and not self._secret_path.exists():
                make_dir(self._secret_path.parent)
                write_secret(self._secret_path, self._secret)
            self._check_version()
        self.on_revive(
            f"jupyter-ckpt: the checkpoint store {self.root} was removed, and its checkpoints with it; "
            "checkpoints go on in a new, empty store there"
        )
        return True

    def _connect(self) -> sqlite3.Connection:
        """One connection per process, reopened after fork (SQLite handles must not cross it)."""
        if self._conn is not None and self._pid == os.getpid():
            self.revive()  # removed under the open catalog: made again, and opened
        if self._conn is None or self._pid != os.getpid():
            path = check_catalog(self.root, create=self._create)
            try:
                try:
                    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=LOCK_WAIT)
                    self._refuse_newer(conn)  # before anything is written: a newer store is left as it is
                except sqlite3.OperationalError as e:
                    # SQLite cannot make the write-ahead log's index: on read-only media (an archive, a snapshot),
                    # or on a full disk, where it said "disk I/O error" and every command, list too, was refused.
                    full = _full(self.root)
                    log = Path(f"{path}-wal")  # made empty by the failed open, on a full disk
                    logged = log.exists() and log.stat().st_size > 0
                    if self._create or logged or (os.access(self.root, os.W_OK) and not full):
                        if full:
                            raise _no_room(self.root) from e
                        raise
                    # No log is left to read, so the catalog is read as the file it is.
                    conn = sqlite3.connect(
                        f"{path.as_uri()}?immutable=1", uri=True, isolation_level=None, check_same_thread=False
                    )
                    self._refuse_newer(conn)
                if self._create:
                    conn.execute("PRAGMA journal_mode=WAL")
                    conn.executescript(_SCHEMA)
                conn.execute("PRAGMA synchronous=NORMAL")
            except sqlite3.DatabaseError as e:
                if _locked(e):  # another process keeps even readers out (exclusive locking mode)
                    raise _translate_sqlite(e, self.root) from e
                if "full" in str(e):  # making a new catalog's tables: "database or disk is full", no damage
                    raise _no_room(self.root) from e
                raise IntegrityError(f"the catalog {path} is unreadable ({e}); nothing was changed") from e
            if self._create:
                with contextlib.suppress(OSError):
                    for suffix in ("", "-wal", "-shm"):
                        os.chmod(str(path) + suffix, 0o600)
            self._conn = conn
            self._pid = os.getpid()
        return self._conn

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            db = self._connect()
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as e:
                raise _translate_sqlite(e, self.root) from e
            try:
                yield db
                db.execute("COMMIT")
            except BaseException as e:
                if db.in_transaction:  # SQLite ends it itself on some errors (a full disk)
                    db.execute("ROLLBACK")
                if isinstance(e, sqlite3.OperationalError):
                    raise _translate_sqlite(e, self.root) from e
                raise

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            db = self._connect()
            db.row_factory = sqlite3.Row
            try:
                return db.execute(sql, args).fetchall()
            except sqlite3.DatabaseError as e:
                if _locked(e):
                    raise _translate_sqlite(e, self.root) from e
                raise IntegrityError(f"the catalog is unreadable: {e}") from e

    def _refuse_newer(self, conn: sqlite3.Connection) -> None:
        """Raise StoreVersionError if the catalog says it was written in a format this version cannot read."""
        has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
        row = conn.execute("SELECT value FROM meta WHERE key='format'").fetchone() if has_meta else None
        if row is None or str(row[0]) == str(FORMAT_VERSION):
            return
        conn.close()
        raise StoreVersionError(
            f"the store {self.root} was written by a newer jupyter-ckpt (format {row[0]}, "
            f"this version reads {FORMAT_VERSION}); upgrade jupyter-ckpt to use it. Nothing was changed."
        )

    def _check_version(self) -> None:
        """Open the catalog (which refuses a newer format), record this version's format in a new one, and sign
        what a store written before cells, identities and rows were signed holds (once: ``meta`` notes it).

        The note is not signed, so the signing must not trust it: anyone who can write the catalog can delete it.
        Only what that older format left unsigned is signed: the cells of a catalog whose cells had no signature
        column, manifests that name no identity (each verified first), and the rows of a catalog whose checkpoints
        had no row signature column, from their manifests. A cell planted beside signed ones, or a signed manifest
        whose row was moved to another checkpoint, stays refused.
        """
        with self._transaction() as db:
            db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (str(FORMAT_VERSION),))
            bound = db.execute("SELECT 1 FROM meta WHERE key='bound'").fetchone() is not None
            # Rows from before their columns were signed (``ROW_FIELDS``): signed from their own manifests, with the
            # tag the row holds (a tag set after its checkpoint was written was kept in the row alone).
            unsigned = "rmac" not in {row[1] for row in db.execute("PRAGMA table_info(checkpoints)")}
            if bound and not unsigned:
                return
            if unsigned:
                db.execute("ALTER TABLE checkpoints ADD COLUMN rmac TEXT")
            if not bound and "mac" not in {row[1] for row in db.execute("PRAGMA table_info(cells)")}:
                db.execute("ALTER TABLE cells ADD COLUMN mac TEXT")
                db.row_factory = sqlite3.Row
                for cell in db.execute("SELECT * FROM cells ORDER BY id").fetchall():
                    mac = self._cell_mac(self._mac_of(db, cell["prev"]), cell)
                    db.execute("UPDATE cells SET mac=? WHERE id=?", (mac, cell["id"]))
            for cid, tag in db.execute("SELECT id, tag FROM checkpoints ORDER BY id").fetchall():
                manifest = self._verified(db, cid)
                if manifest is not None and not bound and "uid" not in manifest:  # from before identities were signed
                    self._bind(db, cid, {**manifest, "tag": tag})
                elif unsigned and (own := self._own_manifest(db, cid)) is not None:
                    self._bind(db, cid, {**own, "tag": tag})
            db.execute("INSERT OR IGNORE INTO meta VALUES ('bound', '1')")

    def _cell_mac(self, prev_mac: str | None, cell: Any) -> str:
        """The signature of one cell: its fields, chained to the signature of the cell before it."""
        return self.sign(json.dumps([prev_mac, *(cell[k] for k in CELL_FIELDS)]))

    def _cell_signed(self, cell: Any, prev_mac: str | None) -> bool:
        """Whether a recorded cell's stored signature is its own, chained to ``prev_mac``."""
        return isinstance(cell["mac"], str) and hmac.compare_digest(self._cell_mac(prev_mac, cell), cell["mac"])

    @staticmethod
    def _mac_of(db: sqlite3.Connection, cell: int | None) -> str | None:
        """A recorded cell's signature as stored (None for no cell)."""
        row = db.execute("SELECT mac FROM cells WHERE id=?", (cell,)).fetchone() if cell is not None else None
        return row[0] if row else None

    def _bind(self, db: sqlite3.Connection, cid: int, manifest: Manifest, inherited: Collection[str] = ()) -> None:
        """Sign checkpoint ``cid``'s ``manifest`` (verified, ``_verified``) again with the identity its row has now
        (a session renamed, a parent deleted, or a manifest written before identities were signed), and what it
        changed since that parent with ``inherited``, the changes of the deleted checkpoints between them."""
        signed: Manifest = {**manifest, **self._identity(db, cid)}  # type: ignore[typeddict-item]
        if "history" not in signed:
            signed["history"] = self._mac_of(db, signed["last_cell"])
        if inherited:
            signed["changed"] = sorted({*signed["changed"], *inherited})
        text = json.dumps(signed, sort_keys=True)
        db.execute("UPDATE checkpoints SET manifest=?, mac=? WHERE id=?", (text, self.sign(text), cid))
        self._write_row(db, cid, signed)

    def _write_row(self, db: sqlite3.Connection, cid: int, manifest: Manifest) -> None:
        """Write the columns of checkpoint ``cid``'s row that choose what is restored from its ``manifest`` (signed
        by the caller, its identity the row's), and sign them (``ROW_FIELDS``)."""
        values = _row_values(manifest)
        db.execute(
            "UPDATE checkpoints SET parent=?, time=?, cell=?, last_cell=?, trigger=?, status=?, tag=?, message=?, "
            "changed=? WHERE id=?",
            (*(values[k] for k in ROW_FIELDS[1:10]), cid),
        )
        db.row_factory = sqlite3.Row
        row = db.execute(self._select() + "WHERE c.id=?", (cid,)).fetchone()
        db.execute("UPDATE checkpoints SET rmac=? WHERE id=?", (self._row_mac(row), cid))

    def _row_mac(self, row: sqlite3.Row) -> str:
        """The signature of a checkpoint row's ``ROW_FIELDS``, bound to its id."""
        return self.sign(json.dumps(["checkpoint row", row["id"], *(row[k] for k in ROW_FIELDS)]))

    def _verified(self, db: sqlite3.Connection, cid: int) -> Manifest | None:
        """Checkpoint ``cid``'s manifest, verified; None if it fails its check (it stays refused)."""
        try:
            return self.manifest_text(*self._manifest_row(db, cid), cid)
        except IntegrityError:
            return None

    @staticmethod
    def _manifest_row(db: sqlite3.Connection, cid: int) -> tuple[str, str]:
        """Checkpoint ``cid``'s manifest text and signature, unread if longer than ``MANIFEST_MAX`` (a row grown to
        a gigabyte by hand); UnknownCheckpoint if there is no such checkpoint."""
        limit = db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MANIFEST_MAX)
        try:
            row = db.execute("SELECT manifest, mac FROM checkpoints WHERE id=?", (cid,)).fetchone()
        except sqlite3.DataError:  # "string or blob too big": SQLite refuses it before it is read
            raise IntegrityError(
                f"checkpoint {cid}: its manifest is longer than any checkpoint writes ({human_bytes(MANIFEST_MAX)}); "
                "it was not read, and will not be restored"
            ) from None
        finally:
            db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limit)
        if row is None:
            raise UnknownCheckpoint(f"no checkpoint {cid}")
        return row[0], row[1]

    def _own_manifest(self, db: sqlite3.Connection, cid: int) -> Manifest | None:
        """Checkpoint ``cid``'s manifest if it verifies and names the identity its row has: the store may then
        sign it again (``_bind``) after changing that row itself; None for one moved there by hand."""
        manifest = self._verified(db, cid)
        return manifest if manifest is not None and not _differ(manifest, self._identity(db, cid)) else None

    @staticmethod
    def _identity(db: sqlite3.Connection, cid: int) -> dict[str, Any]:
        row = db.execute(_IDENTITY_SQL, (cid,)).fetchone()
        return dict(zip(IDENTITY, row, strict=True))

    # -- sessions -------------------------------------------------------------

    def _session_id(self, db: sqlite3.Connection, key: str, *, create: bool) -> int:
        row = db.execute("SELECT id FROM sessions WHERE key=?", (key,)).fetchone()
        if row is not None:
            return int(row[0])
        if not create:
            raise UnknownSession(f"no session {key!r} in the store {self.root}")
        return int(db.execute("INSERT INTO sessions (key, created) VALUES (?, ?)", (key, time.time())).lastrowid or 0)

    def sessions(self) -> list[dict[str, Any]]:
        rows = self._query(
            "SELECT s.key, s.created, COUNT(c.id) AS checkpoints, MAX(c.time) AS last, "
            "COALESCE(SUM(c.new_bytes), 0) AS bytes "
            "FROM sessions s LEFT JOIN checkpoints c ON c.session_id = s.id GROUP BY s.id ORDER BY s.key"
        )
        return [dict(r) for r in rows]

    def policy(self, session: str) -> dict[str, Any] | None:
        """The automatic policy the session remembers, as set (``set_policy``); None if it remembers none.
        IntegrityError if its row, which is not signed, holds no JSON object."""
        rows = self._query("SELECT policy FROM sessions WHERE key=?", (session,))
        if not rows or not rows[0]["policy"]:
            return None
        try:
            policy = json.loads(rows[0]["policy"])
        except (TypeError, ValueError, RecursionError):
            policy = None
        if not isinstance(policy, dict):
            raise IntegrityError(f"the automatic policy remembered for this notebook is damaged ({DAMAGED_POLICY})")
        return policy

    def set_policy(self, session: str, policy: dict[str, Any]) -> None:
        with self._transaction() as db:
            sid = self._session_id(db, session, create=True)
            db.execute("UPDATE sessions SET policy=? WHERE id=?", (json.dumps(policy), sid))

    def move_session(self, old: str, new: str) -> None:
        """Put session ``old``'s checkpoints and cells into session ``new`` (made if missing), and forget ``old``.

        For a kernel that learns its notebook's name after it started: what it
        recorded under its own key goes on in the notebook's session. One
        transaction; a tag used in both sessions refuses the move, which then
        changes nothing. ``new`` keeps its policy if it has one, else takes
        ``old``'s. A remote store may hold (or be sent right now) records of the
        moved checkpoints under ``old``: each gets a new uid, and its old one a
        tombstone, so the next push deletes those and uploads them under ``new``.
        """
        if old == new:
            return
        with self._transaction() as db:
            row = db.execute("SELECT id, policy FROM sessions WHERE key=?", (old,)).fetchone()
            if row is None:
                return
            source, policy = row
            target = self._session_id(db, new, create=True)
            clash = db.execute(
                "SELECT tag FROM checkpoints WHERE session_id=? AND tag IN (SELECT tag FROM checkpoints "
                "WHERE session_id=?)",
                (source, target),
            ).fetchone()
            if clash is not None:
                raise BadArgument(f"tag {clash[0]!r} is used in both {old!r} and {new!r}; nothing was moved")
            # Their manifests name their session and uid, and their children's name their uid: all signed again,
            # but those that did not name their own row before (moved there by hand), which stay refused.
            moved = db.execute(
                "SELECT id FROM checkpoints WHERE session_id=? OR parent IN (SELECT id FROM checkpoints "
                "WHERE session_id=?)",
                (source, source),
            ).fetchall()
            trusted = {cid: m for (cid,) in moved if (m := self._own_manifest(db, cid)) is not None}
            uids = db.execute(
                "SELECT uid FROM uids WHERE checkpoint_id IN (SELECT id FROM checkpoints WHERE session_id=?) "
                "ORDER BY checkpoint_id",
                (source,),
            ).fetchall()
            db.executemany("INSERT OR IGNORE INTO tombstones (uid) VALUES (?)", uids)
            db.executemany("UPDATE uids SET uid=?, uploaded=0 WHERE uid=?", [(new_uid(), uid) for (uid,) in uids])
            db.execute("UPDATE checkpoints SET session_id=? WHERE session_id=?", (target, source))
            db.execute("UPDATE cells SET session_id=? WHERE session_id=?", (target, source))
            db.execute("UPDATE sessions SET policy=COALESCE(policy, ?) WHERE id=?", (policy, target))
            db.execute("DELETE FROM sessions WHERE id=?", (source,))
            for cid, manifest in trusted.items():
                self._bind(db, cid, manifest)

    def add_cell(
        self, session: str, prev: int | None, count: int | None, source: str, status: str, duration: float
    ) -> int:
        """Record one executed cell, signed and chained to ``prev``, the cell before it in this lineage."""
        cell = dict(zip(CELL_FIELDS, (count, source, status, duration, time.time()), strict=True))
        with self._transaction() as db:  # first: a store removed while in use is made again as it is opened
            self.blobs.keep_free(len(source.encode()), "the cell was not recorded in the notebook's history")
            sid = self._session_id(db, session, create=True)
            cur = db.execute(
                "INSERT INTO cells (session_id, prev, count, source, status, duration, time, mac) "
                "VALUES (?,?,?,?,?,?,?,?)",
                (sid, prev, *cell.values(), self._cell_mac(self._mac_of(db, prev), cell)),
            )
            return int(cur.lastrowid or 0)

    def cells(
        self, last_cell: int | None, limit: int = 10_000, *, after: int | None = None, tip: str | None = None
    ) -> list[Cell]:
        """The cells of one lineage, oldest first, ending with ``last_cell`` (and starting after cell ``after``
        when the lineage goes through it).

        Each cell's signature is checked, chained to the one before it, and ``tip`` (a manifest's
        ``history``) must be the newest one's: a cell edited, dropped or moved raises IntegrityError.
        """
        out: list[Cell] = []
        cursor = last_cell
        while cursor is not None and cursor != after and len(out) < limit:
            rows = self._query("SELECT * FROM cells WHERE id=?", (cursor,))
            if not rows:
                raise IntegrityError(f"the execution history lacks cell {cursor}: it was removed from the catalog")
            out.append(cast(Cell, dict(rows[0])))
            cursor = rows[0]["prev"]
        if tip is not None and (not out or out[0]["mac"] != tip):
            raise IntegrityError("the execution history does not end where its checkpoint recorded it")
        # Newest first: each cell's predecessor is the next one read, but for the oldest.
        with self._lock:
            before = [c["mac"] for c in out[1:]] + [self._mac_of(self._connect(), out[-1]["prev"])] if out else []
        for cell, prev_mac in zip(out, before, strict=True):
            if not self._cell_signed(cell, prev_mac):
                raise IntegrityError(
                    f"cell [{cell['count']}] of the execution history fails its signature check: it was "
                    "changed, moved or removed after it ran; it will not be shown or run again"
                )
        return out[::-1]

    def history(self, manifest: Manifest, *, after: int | None = None) -> list[Cell]:
        """The verified cells a checkpoint recorded, oldest first (after cell ``after``)."""
        return self.cells(manifest["last_cell"], after=after, tip=manifest.get("history"))

    # -- checkpoints ----------------------------------------------------------

    def commit(
        self,
        session: str,
        manifest: Manifest,
        blobs: dict[str, BlobInfo],
        *,
        uid: str | None = None,
        new_bytes: int | None = None,
    ) -> int:
        """Insert a checkpoint whose blobs are all durable already; returns its id.

        ``uid`` is given for a checkpoint pulled from the remote store: its record is
        there already, and its blobs are fetched when it is restored.
        """
        if new_bytes is None:
            new_bytes = sum(b.stored for b in blobs.values() if b.new)
        total_bytes = sum(b.stored for b in blobs.values())
        here = {key for key in blobs if self.blobs.has(key)}
        if uid is None and len(here) < len(blobs):
            missing = next(key for key in blobs if key not in here)
            raise IntegrityError(f"refusing to commit a checkpoint whose blob {missing} is missing")
        with self._transaction() as db:
            sid = self._session_id(db, session, create=True)
            # Ids are never reused: SQLite would hand a deleted newest checkpoint's id to the next one, and
            # a URL, a sidebar or a kernel still naming the deleted one would then find another.
            (highest,) = db.execute(
                "SELECT MAX(COALESCE((SELECT MAX(id) FROM checkpoints), 0),"
                " COALESCE((SELECT CAST(value AS INTEGER) FROM meta WHERE key='last_checkpoint'), 0))"
            ).fetchone()
            cid = int(highest) + 1
            db.execute("INSERT OR REPLACE INTO meta VALUES ('last_checkpoint', ?)", (str(cid),))
            parent_uid = db.execute("SELECT uid FROM uids WHERE checkpoint_id=?", (manifest["parent"],)).fetchone()
            given = uid or manifest.get("uid")  # capture's: a writer's result committed once (``writer.adopt``)
            if (
                given is not None
                and db.execute(
                    "SELECT 1 FROM uids WHERE uid=? UNION SELECT 1 FROM tombstones WHERE uid=?", (given, given)
                ).fetchone()
            ):
                raise IntegrityError(
                    f"checkpoint {given} is in the store already, or was deleted from it; it is not committed again"
                )
            identity = {
                "uid": given or new_uid(),
                "session": session,
                "parent_uid": parent_uid[0] if parent_uid else None,
                "history": self._mac_of(db, manifest["last_cell"]),
            }
            signed: Manifest = {**manifest, **identity}  # type: ignore[typeddict-item]
            text = json.dumps(signed, sort_keys=True)
            if len(text) > MANIFEST_MAX:  # it could not be read back (``_manifest_row``)
                raise BadArgument(
                    f"the checkpoint's manifest is {human_bytes(len(text))}, more than a checkpoint may hold "
                    f"({human_bytes(MANIFEST_MAX)}); it was not committed: exclude variables (%checkpoint exclude)"
                )
            if (tag := manifest.get("tag")) is not None:
                self._check_tag_free(db, sid, tag, cid)
            db.execute(
                "INSERT INTO checkpoints (id, session_id, time, trigger, status, new_bytes, total_bytes, changed, "
                "manifest, mac) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (cid, sid, 0, "", "", new_bytes, total_bytes, "[]", text, self.sign(text)),
            )
            self._write_row(db, cid, signed)
            db.executemany("INSERT OR IGNORE INTO refs VALUES (?, ?)", [(cid, k) for k in blobs])
            db.executemany(
                "INSERT OR IGNORE INTO blobs (key, size, stored) VALUES (?, ?, ?)",
                [(b.key, b.size, b.stored) for b in blobs.values() if b.key in here],
            )
            db.execute(
                "INSERT INTO uids (checkpoint_id, uid, uploaded, local) VALUES (?, ?, ?, ?)",
                (cid, identity["uid"], uid is not None, len(here) == len(blobs)),
            )
        if uid is None:  # written or checked by the writer that made it (LocalBlobs._sound), maybe a forked child
            self.blobs.known_sound(blobs)
        return cid

    def manifest(self, checkpoint_id: int) -> Manifest:
        """The signed manifest of one checkpoint, verified, and checked to be this checkpoint's, before anyone
        reads it."""
        with self._lock:
            db = self._connect()
            text, mac = self._manifest_row(db, checkpoint_id)
            identity = self._identity(db, checkpoint_id)
        manifest = self.manifest_text(text, mac, checkpoint_id)
        wrong = _differ(manifest, identity)
        if wrong:
            raise IntegrityError(
                f"checkpoint {checkpoint_id}: its manifest was signed for another checkpoint (its {', '.join(wrong)} "
                "differ); it will not be restored"
            )
        return manifest

    def sign(self, text: str) -> str:
        return hmac.new(self._secret, text.encode(), hashlib.sha256).hexdigest()

    def seal(self, value: Any) -> list[str]:
        """``value`` as JSON text with its signature: a file one process leaves in the store for another (a
        writer's result for its kernel to commit, a kernel's record), where anyone who can write the store could
        put a file (``unseal``)."""
        text = json.dumps(value)
        return [text, self.sign(text)]

    def unseal(self, sealed: Any, what: str) -> Any:
        """The value ``seal`` made; IntegrityError naming ``what`` if this store's secret did not sign it."""
        if not (
            isinstance(sealed, list)
            and len(sealed) == 2
            and all(isinstance(part, str) for part in sealed)
            and hmac.compare_digest(self.sign(sealed[0]), sealed[1])
        ):
            raise IntegrityError(
                f"{what} fails its signature check: this store's secret did not sign it; it is not used"
            )
        return json.loads(sealed[0])

    def manifest_text(self, text: str, mac: str, name: int | str) -> Manifest:
        """A manifest read from its signed text; raises IntegrityError naming checkpoint ``name`` if it fails."""
        if not isinstance(text, str) or not isinstance(mac, str) or not hmac.compare_digest(self.sign(text), mac):
            raise IntegrityError(f"checkpoint {name}: its manifest fails its signature check; it will not be restored")
        manifest: Manifest = json.loads(text)  # signed by this store's secret: written by capture
        return manifest

    def repair(self) -> list[str]:
        """Mend what ``verify`` finds in the checkpoints' rows, which are not signed where the manifest is: a row
        changed by hand is written again from its signed manifest (its columns, session, uid); a checkpoint whose
        manifest fails its check, which no restore takes, is deleted. Returns what it did, a line for each."""
        done: list[str] = []
        doomed: list[int] = []
        with self._transaction() as db:
            for (cid,) in db.execute("SELECT id FROM checkpoints ORDER BY id").fetchall():
                db.row_factory = sqlite3.Row
                row = db.execute(self._select() + "WHERE c.id=?", (cid,)).fetchone()
                if (manifest := self._verified(db, cid)) is None:
                    doomed.append(cid)
                elif self._row_signed(row) and not _differ(manifest, self._identity(db, cid)):
                    continue
                elif self._put_back(db, cid, manifest):
                    done.append(f"checkpoint {cid}: its row, changed by hand, was written again from its manifest")
                else:
                    doomed.append(cid)
        self.delete(doomed, missing_ok=True)
        return done + [f"checkpoint {cid}: deleted, its manifest fails its check" for cid in doomed]

    def _put_back(self, db: sqlite3.Connection, cid: int, manifest: Manifest) -> bool:
        """Write what checkpoint ``cid``'s verified manifest says into its row, changed by hand; whether the row is
        then the manifest's (not if another row has taken its session's tag or its uid since)."""
        try:
            sid = self._session_id(db, manifest["session"], create=False)
            db.execute("UPDATE checkpoints SET session_id=? WHERE id=?", (sid, cid))
            if "uid" in manifest:
                db.execute("UPDATE uids SET uid=? WHERE checkpoint_id=?", (manifest["uid"], cid))
            self._write_row(db, cid, manifest)
        except (sqlite3.IntegrityError, UnknownSession):
            return False
        return not _differ(manifest, self._identity(db, cid))

    def _row_signed(self, row: sqlite3.Row) -> bool:
        """Whether a checkpoint row's ``ROW_FIELDS`` are as the store wrote them (``_write_row``)."""
        whole = tuple(row)
        if whole in self._sound_rows:  # the same values and signature as a row checked before: listed at every cell
            return True
        try:
            signed = isinstance(mac := row["rmac"], str) and hmac.compare_digest(self._row_mac(row), mac)
        except (TypeError, ValueError):  # a value of a kind SQLite holds and JSON does not (bytes) put there by hand
            return False
        if signed:
            self._sound_rows.add(whole)
        return signed

    def _record(self, row: sqlite3.Row) -> CheckpointRecord:
        """A row as a record. Its columns are unsigned, and choose what is restored: they are used only if their
        signature checks out; else a row changed by hand is read from its signed manifest (the column is
        ignored), or, if that fails, or names another place in the timeline, refused with IntegrityError."""
        values: dict[str, Any] = dict(row)
        if not self._row_signed(row):
            values.update(_row_values(self.manifest(row["id"])))
            for count in ("new_bytes", "total_bytes"):  # not signed anywhere: they only count
                values[count] = values[count] if type(values[count]) is int else 0
        return CheckpointRecord(
            id=values["id"],
            session=values["skey"],
            parent=values["parent"],
            time=values["time"],
            cell=values["cell"],
            trigger=values["trigger"],
            status=values["status"],
            tag=values["tag"],
            message=values["message"],
            new_bytes=values["new_bytes"],
            total_bytes=values["total_bytes"],
            changed=json.loads(values["changed"]),
            kernel_start=values["parent"] is None or (values["message"] or "").startswith(NEW_KERNEL),
        )

    def _select(self) -> str:
        """The query of checkpoint rows with their signature; a catalog from before rows were signed, opened by the
        command line, which changes nothing, has none (each row is then read from its manifest)."""
        with self._lock:
            db = self._connect()
            signed = any(row[1] == "rmac" for row in db.execute("PRAGMA table_info(checkpoints)"))
        return (
            "SELECT c.id, s.key AS skey, c.parent, c.time, c.cell, c.last_cell, c.trigger, c.status, c.tag, "
            f"c.message, c.changed, c.new_bytes, c.total_bytes, {'c.rmac' if signed else 'NULL AS rmac'} "
            "FROM checkpoints c JOIN sessions s ON s.id = c.session_id "
        )

    def _records(self, where: str, args: tuple[Any, ...]) -> tuple[list[CheckpointRecord], list[str]]:
        """The checkpoints ``where`` selects, oldest first, and what is wrong with each left out (IntegrityError).

        Oldest is by when each state was taken (as its verified record says, not a column edited by hand), ids
        breaking ties: a pull gives another machine's checkpoints the next ids here, however old they are."""
        records: list[CheckpointRecord] = []
        problems: list[str] = []
        for row in self._query(self._select() + where + " ORDER BY c.id", args):
            try:
                records.append(self._record(row))
            except UnknownCheckpoint:  # deleted since it was listed
                continue
            except CheckpointError as e:
                problems.append(f"{e}; it is left out of the timeline")
        return sorted(records, key=lambda r: (r.time, r.id)), problems

    def checkpoints(self, session: str) -> list[CheckpointRecord]:
        """A session's checkpoints, oldest first; a row damaged by hand is left out (``verify`` names it)."""
        if not self._query("SELECT 1 FROM sessions WHERE key=?", (session,)):
            raise UnknownSession(f"no session {session!r} in the store {self.root}")
        return self._records("WHERE s.key=?", (session,))[0]

    def get(self, checkpoint_id: int) -> CheckpointRecord:
        rows = self._query(self._select() + "WHERE c.id=?", (checkpoint_id,))
        if not rows:
            raise UnknownCheckpoint(f"no checkpoint {checkpoint_id}")
        try:
            return self._record(rows[0])
        except CheckpointError as e:
            raise IntegrityError(f"{e}; it is left out of the timeline") from None

    def exists(self, checkpoint_id: int) -> bool:
        return bool(self._query("SELECT 1 FROM checkpoints WHERE id=?", (checkpoint_id,)))

    def last_cell(self, checkpoint_id: int) -> int | None:
        rows = self._query("SELECT last_cell FROM checkpoints WHERE id=?", (checkpoint_id,))
        return rows[0]["last_cell"] if rows else None

    def tag(self, checkpoint_id: int, tag: str | None) -> None:
        if tag is not None:
            check_tag(tag)
        with self._transaction() as db:
            row = db.execute("SELECT session_id FROM checkpoints WHERE id=?", (checkpoint_id,)).fetchone()
            if row is None:
                raise UnknownCheckpoint(f"no checkpoint {checkpoint_id}")
            if tag is not None:
                self._check_tag_free(db, row[0], tag, checkpoint_id)
            manifest = self._own_manifest(db, checkpoint_id)
            if manifest is None:
                raise IntegrityError(
                    f"checkpoint {checkpoint_id}: its manifest fails its signature check; it cannot be tagged"
                )
            self._bind(db, checkpoint_id, {**manifest, "tag": tag})  # the tag chooses what a REF restores: signed
            if self._has_remote_tables():  # the remote record carries the tag: upload it again
                db.execute("UPDATE uids SET uploaded=0 WHERE checkpoint_id=?", (checkpoint_id,))

    @staticmethod
    def _check_tag_free(db: sqlite3.Connection, session_id: int, tag: str, checkpoint_id: int) -> None:
        """Raise BadArgument naming the checkpoint that holds ``tag`` in the session, if one but ``checkpoint_id``
        does (it said "already used in this session", where a kernel's save named it)."""
        holder = db.execute(
            "SELECT id FROM checkpoints WHERE session_id=? AND tag=? AND id!=?", (session_id, tag, checkpoint_id)
        ).fetchone()
        if holder is not None:
            raise BadArgument(f"tag {tag!r} is already used by checkpoint {holder[0]}")

    def delete(self, checkpoint_ids: list[int], *, missing_ok: bool = False) -> list[int]:
        """Forget checkpoints; their blobs go at the next ``gc`` if nothing else uses them. Returns the ids it
        deleted: with ``missing_ok`` (thinning, which another process's thinning may have been first to),
        those of ``checkpoint_ids`` that were still there; else an id not there is UnknownCheckpoint.

        A checkpoint the remote store holds leaves a tombstone: the next push deletes
        its record there, and no pull brings it back.
        """
        deleted: list[int] = []
        with self._transaction() as db:
            remote = self._has_remote_tables()
            # What each child of a deleted checkpoint changed since its new parent: its own changes and those of
            # every checkpoint deleted between them. A child that changed nothing held the deleted one's state,
            # not its new parent's (``timeline.state_of``).
            inherited: dict[int, set[str]] = {}
            # Each child's manifest, if it named its own row before this changed its parent.
            trusted: dict[int, Manifest | None] = {}
            for cid in checkpoint_ids:
                row = db.execute("SELECT parent, changed FROM checkpoints WHERE id=?", (cid,)).fetchone()
                if row is None and missing_ok:
                    continue
                if row is None:
                    raise UnknownCheckpoint(f"no checkpoint {cid}")
                deleted.append(cid)
                # Children keep a working parent link: they hang from the deleted one's parent.
                changed = set(json.loads(row[1])) | inherited.pop(cid, set())
                for (child,) in db.execute("SELECT id FROM checkpoints WHERE parent=?", (cid,)).fetchall():
                    inherited.setdefault(child, set()).update(changed)
                    if child not in trusted:
                        trusted[child] = self._own_manifest(db, child)
                db.execute("UPDATE checkpoints SET parent=? WHERE parent=?", (row[0], cid))
                db.execute("DELETE FROM checkpoints WHERE id=?", (cid,))
                db.execute("DELETE FROM refs WHERE checkpoint_id=?", (cid,))
                if remote:
                    db.execute(
                        "INSERT OR IGNORE INTO tombstones (uid) SELECT uid FROM uids WHERE checkpoint_id=?", (cid,)
                    )
                    db.execute("DELETE FROM uids WHERE checkpoint_id=?", (cid,))
            # Signed again once, with the parent they have at the end: not once per deleted ancestor.
            for child, changed in sorted(inherited.items()):
                if (manifest := trusted[child]) is not None:  # one moved to this row by hand stays refused
                    self._bind(db, child, manifest, changed)
        return deleted

    def _has_remote_tables(self) -> bool:
        """Whether the catalog has the remote tier's tables (a store the CLI opened read-only may predate them)."""
        return bool(self._query("SELECT 1 FROM sqlite_master WHERE type='table' AND name='uids'"))

    def size(self) -> int:
        """Bytes of blob files the catalog knows, referenced or not yet collected, and of the catalog itself."""
        rows = self._query("SELECT COALESCE(SUM(stored), 0) AS n FROM blobs")
        return int(rows[0]["n"]) + self.catalog_size()

    def catalog_size(self) -> int:
        """Bytes of the catalog's files (its write-ahead log included)."""
        return sum(p.stat().st_size for p in self.root.glob("catalog.sqlite*") if p.is_file())

    def referenced_size(self) -> int:
        """Bytes of the blob files some checkpoint references: the store's size once ``gc`` has run."""
        rows = self._query("SELECT COALESCE(SUM(stored), 0) AS n FROM blobs WHERE key IN (SELECT blob FROM refs)")
        return int(rows[0]["n"])

    def gc(self) -> tuple[int, int]:
        """Delete blobs no checkpoint references, and temp files of dead writers. Returns (files, bytes).

        A save in progress (here or in another kernel) may have written blobs, or found
        old unreferenced ones it reuses, that its catalog row will reference once it commits:
        blob files written or reused since the oldest such save began stay (``LocalBlobs.hold``).
        """
        # A margin: a file's time comes from a coarser clock (a tick of the OS kernel) than time.time().
        now = time.time()
        cutoff = min(now, self.blobs.oldest_lease() or now) - 0.1
        with self._transaction() as db:
            db.execute("DELETE FROM blobs WHERE key NOT IN (SELECT blob FROM refs)")
            referenced = {r[0] for r in db.execute("SELECT DISTINCT blob FROM refs")}
        with self._lock, contextlib.suppress(sqlite3.OperationalError):  # busy: the log is truncated another time
            # The write-ahead log keeps the pages of every deletion until it is checkpointed: it counts in the
            # store's size, and after thinning it can hold more than the checkpoints it made room for.
            self._connect().execute("PRAGMA wal_checkpoint(TRUNCATE)")
        # Files go only after COMMIT, so a crash here leaves orphans, never dangling rows.
        count, freed = self.blobs.clean_tmp()
        for key, stat in self.blobs.listing().items():
            if key not in referenced and stat.modified < cutoff and (size := self.blobs.collect(key, cutoff)):
                count += 1
                freed += size
        return count, freed

    def verify(self, remote_only: Collection[int] = ()) -> list[str]:
        """Check every manifest (its signature, and that it is its row's), every recorded cell's signature and
        chain, every blob's signature, and that every referenced blob exists, but for the checkpoints
        ``remote_only`` (``RemoteCatalog.remote_only``), whose blobs may still be only in the remote store."""
        problems: list[str] = []
        # What a kernel or a gc commits meanwhile is no damage. Listed before the cells, which are never deleted and
        # are recorded before their checkpoint: every cell a listed checkpoint names is read below.
        listed = [row["id"] for row in self._query("SELECT id FROM checkpoints ORDER BY id")]
        macs: dict[int, str] = {}  # each cell's signature as stored
        for cell in self._query(
            "SELECT c.*, s.key AS skey FROM cells c JOIN sessions s ON s.id = c.session_id ORDER BY c.id"
        ):
            macs[cell["id"]] = cell["mac"]
            if cell["prev"] is not None and cell["prev"] not in macs:
                problems.append(f"session {cell['skey']}: cell [{cell['count']}] follows a cell that was removed")
            elif not self._cell_signed(cell, macs.get(cell["prev"])):
                problems.append(
                    f"session {cell['skey']}: cell [{cell['count']}] fails its signature check (changed, moved "
                    "or removed after it ran); replay will not run it"
                )
        for row in self._query(self._select() + "ORDER BY c.id"):
            if not self._row_signed(row):
                with contextlib.suppress(CheckpointError):  # a manifest that fails its check is named below
                    self.manifest(row["id"])
                    problems.append(
                        f"checkpoint {row['id']}: its row in the catalog was changed by hand; what its signed "
                        "manifest says is used (jupyter ckpt verify --repair writes it back)"
                    )
        for cid in listed:
            try:
                manifest = self.manifest(cid)
            except UnknownCheckpoint:  # deleted since it was listed ("no checkpoint 569")
                continue
            except CheckpointError as e:
                problems.append(str(e))
                continue
            if manifest["last_cell"] is not None and manifest.get("history") != macs.get(manifest["last_cell"]):
                problems.append(f"checkpoint {cid}: its execution history does not end where it recorded it")
        for row in self._query("SELECT DISTINCT blob, checkpoint_id FROM refs ORDER BY blob"):
            if row["checkpoint_id"] in remote_only and not self.blobs.has(row["blob"]):
                continue  # fetched from the remote store, and verified, when it is restored
            try:
                self.blobs.read(row["blob"])
            except CheckpointError as e:
                if self._query("SELECT 1 FROM refs WHERE blob=? AND checkpoint_id=?", tuple(row)):  # not thinned since
                    problems.append(f"checkpoint {row['checkpoint_id']}: {e}")
        return problems


def _full(root: Path) -> bool:
    """Whether the disk under ``root`` is too full for SQLite to make or grow the catalog's log."""
    return shutil.disk_usage(root).free < _ROOM_FOR_THE_LOG


def _no_room(root: Path) -> StoreFullError:
    return StoreFullError(f"the disk under the store {root} is full; nothing was changed. Make room on it.")


def _locked(e: sqlite3.DatabaseError) -> bool:
    """Whether SQLite gave up waiting for another process's lock (``LOCK_WAIT``)."""
    return isinstance(e, sqlite3.OperationalError) and "locked" in str(e)


def _translate_sqlite(e: sqlite3.DatabaseError, root: Path) -> CheckpointError:
    if _locked(e):  # it was "the catalog could not be written", exit 3, as a damaged one
        return StoreBusy(
            f"the catalog {root / 'catalog.sqlite'} stayed locked by another process (a kernel committing a "
            f"checkpoint, a gc) for {LOCK_WAIT} s; nothing was changed. Try again."
        )
    if "full" in str(e) or _full(root):  # a catalog read as a file on a full disk cannot be written: "readonly"
        return _no_room(root)
    if "readonly" in str(e):
        return StoreReadOnly(f"the checkpoint store cannot be written (a read-only disk or file?): {e}")
    return IntegrityError(f"the catalog could not be written: {e}")

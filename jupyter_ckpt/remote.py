"""The remote tier: checkpoints copied to an object store, so that they outlive the machine.

Layout under the URL (``s3://bucket/prefix``, ``gs://``, ``az://``: any fsspec filesystem)::

    blobs/ab/<key>                    a blob file exactly as the local store keeps it: header, signature, payload
    sessions/<hash>/<uid>.json        one checkpoint's record, signed: its manifest, blobs, parent and cells
    sessions/<hash>/packs/<a>_<b>.json  copies of 64 of those records, uids a to b, read in one request

Blobs are immutable and content-addressed: a key the remote holds is never
uploaded again. A checkpoint's record is uploaded after every blob it names and
is the commit point: a checkpoint half-uploaded when its machine died has no
record, so no pull sees it, and ``gc`` collects its blobs once they are older
than a grace period (a writer still uploading is younger than that). Records are
named by uids (``manifest.new_uid``), so machines writing one prefix need no
counter between them; the local catalog gives each checkpoint it pulls an id of
its own and can be rebuilt from the records.

A pack holds the same signed bytes as 64 record objects, so that a new machine
learns a long timeline in a few requests rather than one per checkpoint. The
listing stays the truth: a pack's copy is read only for a record still listed
(uids are never reused, so the copy is the object's bytes), and it is checked
like the object. A push packs every 64 records it uploaded; a pull packs those
it had to read one by one; deleting a checkpoint deletes the packs whose uid
range holds it, and ``gc`` those holding a record no longer listed.

``RemoteBlobs`` keeps blob files as ``blobs.LocalBlobs`` does, behind the same
``BlobStorage`` interface. The local store stays the fast tier: a checkpoint is durable there first, and a
``Replica`` uploads it from a background thread, retrying with backoff while the
remote cannot be reached. A pull imports the records only; a checkpoint's blobs
are fetched, in parallel and verified, when it is restored. This module moves the
bytes; what was uploaded, pulled and fetched is recorded in the local catalog by
``remote_catalog.RemoteCatalog``, which a push and a pull ask what to move.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .blobs import HEADER_MAX, BlobStat, BlobStorage, check_key, longer_than
from .capture import blob_sizes
from .errors import IntegrityError, RemoteError
from .manifest import FORMAT_VERSION, Manifest, check_uid
from .memory import headroom
from .notice import Notice
from .remote_catalog import RemoteCatalog
from .store import Store
from .units import human_bytes

_MAX_DELAY = 60.0
PACK = 64  # records per pack
# Bytes past which an object among the records is none that jupyter-ckpt wrote (a record holds a manifest, a few
# hundred bytes a variable, and the cells since its parent): it is refused, or a pack passed over, unread. Anyone
# who can write the bucket could otherwise have a pull download gigabytes into the kernel's memory.
RECORD_MAX = 64 << 20


def is_remote(url: str) -> bool:
    """Whether a store URL names an object store rather than a local directory."""
    return "://" in url and not url.startswith("file://")


def _reason(e: BaseException) -> str:
    """What went wrong, in a line a user can act on."""
    if isinstance(e, PermissionError):
        return f"access denied, check the credentials ({_first_line(e)})"
    if isinstance(e, FileNotFoundError):
        return f"not found, check that the bucket exists ({_first_line(e)})"
    return _first_line(e) or type(e).__name__


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""


# botocore (1.36 on) computes a CRC32 of every byte uploaded and checks one of every byte downloaded, in the
# event loop that every transfer of the filesystem waits on: a fifth to a third of a download's CPU here. Every
# blob and record here carries its own signature, checked on every read, so a checksum is asked for only where
# S3 requires one.
S3_CHECKSUMS = {"request_checksum_calculation": "when_required", "response_checksum_validation": "when_required"}
# An endpoint that takes connections and never answers (a hung proxy, a dropped route) must fail a request in
# seconds, not in botocore's minutes (60 s per read, five attempts, each retried five times by s3fs): the
# kernel's uploads wait on it, and ``wait()`` with them. A read times out after 10 s without a byte.
S3_TIMEOUTS = {"connect_timeout": 5, "read_timeout": 10, "retries": {"max_attempts": 1, "mode": "standard"}}
S3_RETRIES = 2  # s3fs's own attempts at each request
# A pull asks for every record of a timeline at once (``Remote.get_records``); botocore's pool of 10 connections
# would make hundreds of them wait in turns of 10 round trips.
S3_CONNECTIONS = {"max_pool_connections": 64}
_S3 = re.compile(r"s3a?://")


def _options(url: str) -> dict[str, Any]:
    """The filesystem options this tier adds to those the user configured for fsspec (which win)."""
    import fsspec.config

    if not _S3.match(url):
        return {}
    protocol = url.split("://", 1)[0]
    configured = fsspec.config.conf.get(protocol, {}).get("config_kwargs", {})
    return {"config_kwargs": {**S3_CHECKSUMS, **S3_TIMEOUTS, **S3_CONNECTIONS, **configured}}


class Remote:
    """One object-store prefix, reached through fsspec; every failure is a RemoteError naming the URL."""

    def __init__(self, url: str) -> None:
        if not url.partition("://")[2].strip("/"):
            raise RemoteError(f"{url!r} names no bucket: give one, as in s3://bucket/prefix")
        self.url = url.rstrip("/")
        try:
            import fsspec

            # A filesystem of its own, with the credentials and endpoint the environment holds now.
            self.fs, root = fsspec.core.url_to_fs(self.url, skip_instance_cache=True, **_options(self.url))
        except ImportError as e:
            raise RemoteError(
                f"the checkpoint store {url} needs a client this Python lacks ({e.name or e}): "
                "pip install 'jupyter-ckpt[s3]' (or gcsfs, adlfs)"
            ) from None
        except ValueError as e:
            raise RemoteError(f"{url!r} is not a store URL this version can use: {e}") from None
        except Exception as e:  # a client that connects as it is made (ftp, sftp) and cannot
            raise RemoteError(f"the checkpoint store {url} cannot be used: {_reason(e)}") from None
        self.root = str(root).rstrip("/")
        if _S3.match(self.url):
            self.fs.retries = S3_RETRIES
        self.blobs: BlobStorage = RemoteBlobs(self)  # the local store's blob files, kept in the object store

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except RemoteError:
            raise
        except Exception as e:
            raise RemoteError(f"the checkpoint store {self.url} cannot be used ({what}): {_reason(e)}") from e

    def record_path(self, session: str, uid: str) -> str:
        return f"{self.root}/{self.records_of(session)}/{check_uid(uid)}.json"

    @staticmethod
    def records_of(session: str | None) -> str:
        """Where the records of a session are (of every session with None), relative to the prefix."""
        return "sessions" if session is None else f"sessions/{hashlib.sha256(session.encode()).hexdigest()[:32]}"

    def put_file(self, local: str, path: str) -> None:
        self._call("upload", self.fs.put_file, local, path)

    def exists(self, path: str) -> bool:
        return bool(self._call("look up", self.fs.exists, path))

    def put_bytes(self, path: str, data: bytes) -> None:
        self._call("upload", self.fs.pipe_file, path, data)

    def get_bytes(self, path: str, most: int | None = None) -> bytes:
        """An object's bytes; with ``most``, only its first ``most`` + 1 (an object grown past what it should hold
        is never downloaded whole)."""
        data: bytes = self._call("download", self._whole, path, None if most is None else most + 1)
        return data

    def get_records(self, paths: list[str]) -> dict[str, bytes]:
        """Small objects (records), asked for all at once: the filesystem sends the requests together (s3fs from
        its event loop, on up to 64 connections) instead of in turns of the pool's 8 threads. Each is asked for as
        a range from byte 0, as ``_whole`` says why, of at most a byte more than any record holds (``RECORD_MAX``:
        one replaced by a larger object since it was listed is not downloaded whole). One deleted since it was
        listed (another machine's ``delete``) is left out; any other failure is raised."""
        if not paths:
            return {}
        found = self._call("download", lambda: self.fs.cat(paths, on_error="return", start=0, end=RECORD_MAX + 1))
        out = {}
        for path in paths:
            data = found.get(path)
            if isinstance(data, FileNotFoundError):
                continue
            if isinstance(data, BaseException):
                data = self.get_bytes(path, RECORD_MAX)  # the same request alone, whose failure says what it is
            out[path] = bytes(data)
        return out

    def _whole(self, path: str, end: int | None = None) -> bytes:
        """An object's bytes in one request (up to ``end``): asked for as the range from byte 0, since without a
        range s3fs asks for the size first (one more round trip per object, to decide on a split download). An
        empty object has no such range; it is asked for whole."""
        try:
            return bytes(self.fs.cat_file(path, start=0, end=end))
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
            return bytes(self.fs.cat_file(path))

    def delete(self, path: str) -> None:
        self._call("delete", self.fs.rm_file, path)

    def listing(self, under: str) -> dict[str, dict[str, Any]]:
        """Every object below ``under`` (a path relative to the prefix) with its details, fresh from the store."""
        full = f"{self.root}/{under}"
        self.fs.invalidate_cache()
        found = self._call("list", self.fs.find, full, None, False, True)
        return dict(found)


class RemoteBlobs:
    """Blob files in an object store, under ``blobs/ab/<key>``: the same bytes as the local files."""

    def __init__(self, remote: Remote) -> None:
        self._remote = remote

    def _path(self, key: str) -> str:
        return f"{self._remote.root}/blobs/{key[:2]}/{check_key(key)}"

    def has(self, key: str) -> bool:
        return self._remote.exists(self._path(key))

    def read_file(self, key: str, most: int | None = None) -> bytes:
        data = self._remote.get_bytes(self._path(key), most)
        if most is not None and len(data) > most:  # a byte more than it can hold was asked for: it is longer
            raise longer_than(key, most)
        return data

    def write_file(self, key: str, source: bytes | Path) -> None:
        if isinstance(source, Path):
            self._remote.put_file(str(source), self._path(key))
        else:
            self._remote.put_bytes(self._path(key), source)

    def delete(self, key: str) -> None:
        self._remote.delete(self._path(key))

    def listing(self) -> dict[str, BlobStat]:
        now = time.time()
        return {
            path.rsplit("/", 1)[-1]: BlobStat(int(info.get("size", 0)), _modified(info, now))
            for path, info in self._remote.listing("blobs").items()
        }


class Replica:
    """Keeps a remote prefix in step with a local store: pushes from a background thread, pulls on request."""

    def __init__(self, store: Store, remote: Remote, notify: Callable[[str], None] = lambda m: None) -> None:
        self.store = store
        self.catalog = RemoteCatalog(store)  # what the remote holds and lacks, as the local catalog records it
        self.remote = remote
        self._notify = notify
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="jupyter-ckpt-remote")
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._done = threading.Condition()
        self._begun = self._finished = 0
        self._busy = threading.Lock()  # one push or pull at a time
        self._trouble = Notice(notify)  # that the remote store cannot be used now, said once until it can
        self._why = ""  # why, as the last failure put it
        self._refused = Notice(notify)  # the records a pull refused for their signature, said once each
        # The pull of the session followed is over (or failed): its timeline is as full as it gets.
        self.pulled = threading.Event()
        self._pulling: str | None = None  # the session to pull in the next round (``follow``)
        self._thread: threading.Thread | None = None
        self._keeping: threading.Thread | None = None  # writes the last fetch's blobs to the local tier
        self._fetches: list[Future[None]] = []  # the downloads of the last fetch's blobs
        self.kept: Callable[[], None] = lambda: None  # told once a fetched checkpoint's blobs are written here
        self._unpacked: dict[str, bytes] = {}  # records this process uploaded and no pack holds yet, by path

    @property
    def error(self) -> str | None:
        """Why the remote store cannot be used now, or None."""
        return self._why if self._trouble.current is not None else None

    @property
    def url(self) -> str:
        return self.remote.url

    # -- the record of a checkpoint ---------------------------------------------

    def _signed(self, record: dict[str, Any]) -> bytes:
        text = json.dumps({"format": FORMAT_VERSION, **record}, sort_keys=True)
        return json.dumps({"record": text, "mac": self.store.sign(text)}).encode()

    def _verified(self, path: str, data: bytes) -> dict[str, Any]:
        if len(data) > RECORD_MAX:  # grown since it was listed: only its first bytes were downloaded
            raise IntegrityError(
                f"the remote record {path} holds more than a record ever does ({human_bytes(RECORD_MAX)}); it was not "
                "pulled"
            )
        try:
            outer = json.loads(data)
            text, mac = outer["record"], outer["mac"]
            record = dict(json.loads(text))
        except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: brackets nested past Python's limit
            raise IntegrityError(f"the remote record {path} is damaged; it was not pulled") from None
        if not isinstance(mac, str) or not hmac.compare_digest(self.store.sign(text), mac):
            raise IntegrityError(f"the remote record {path} fails its signature check; it was not pulled")
        if record.get("format") != FORMAT_VERSION or not path.endswith(f"/{record.get('uid')}.json"):
            raise IntegrityError(f"the remote record {path} is not one this version reads; it was not pulled")
        return record

    # -- moving checkpoints ------------------------------------------------------

    def push(self) -> int:
        """Upload every checkpoint the remote lacks, blobs first and the record last; returns how many."""
        with self._busy:
            pushed = 0
            for checkpoint_id, uid in self.catalog.to_upload():
                try:  # the record names the uid its signed manifest does, of the form new_uid makes: one planted in
                    # the catalog wrote outside the session's folder, or over another checkpoint's record
                    record = self.catalog.record(checkpoint_id)
                    path = self.remote.record_path(record["session"], record["uid"])
                except IntegrityError as e:
                    self._refused.tell(f"jupyter-ckpt: checkpoint {checkpoint_id} was not uploaded: {e}", str(e))
                    continue
                list(self._pool.map(self._upload_blob, self.catalog.blobs_to_upload(checkpoint_id)))
                signed = self._signed(record)
                self.remote.put_bytes(path, signed)
                self.catalog.mark_uploaded(checkpoint_id, uid)
                self._unpacked[path] = signed
                pushed += 1
            tombstones = self.catalog.tombstones()
            if tombstones:
                listed = self.remote.listing("sessions")
                records = {_uid(path): path for path in listed if not _is_pack(path)}
                for uid in tombstones:
                    folder = records[uid].rsplit("/", 1)[0] + "/" if uid in records else ""  # else look everywhere
                    for pack in [p for p in listed if _is_pack(p) and p.startswith(folder) and _holds(p, uid)]:
                        self.remote.delete(pack)  # before the record: no copy of it outlives it
                    if uid in records:
                        self.remote.delete(records[uid])
                    self._unpacked.pop(records.get(uid, ""), None)
                    self.catalog.mark_tombstone_pushed(uid)
            for path in self._pack(self._unpacked):
                del self._unpacked[path]
            return pushed

    def _read_records(
        self, listed: dict[str, dict[str, Any]], wanted: Callable[[str], bool]
    ) -> tuple[list[dict[str, Any]], list[str], dict[str, dict[str, str]]]:
        """The records among ``listed`` (a listing of ``sessions/``) whose uid is ``wanted``, checked: from packs
        where one holds them, else one request each (those are then packed for the next machine). Returns them,
        why each one refused for its signature or its size was, and the packs it read (path: ``_entries``)."""
        paths = [p for p in listed if _size(listed[p]) <= RECORD_MAX]
        refused = [
            f"the remote record {p} holds {_size(listed[p])} bytes, more than a record ever does "
            f"({human_bytes(RECORD_MAX)}); it was not pulled"
            for p in listed
            if p not in paths and not _is_pack(p) and wanted(_uid(p))
        ]
        records = {_uid(p): p for p in paths if not _is_pack(p) and wanted(_uid(p))}
        packs = [p for p in paths if _is_pack(p) and any(_holds(p, uid) for uid in records)]
        read = {pack: _entries(data) for pack, data in self.remote.get_records(packs).items()}
        found: dict[str, dict[str, Any]] = {}
        for entries in read.values():
            for uid, text in entries.items():
                if uid in records and uid not in found:
                    with contextlib.suppress(IntegrityError):  # a bad copy: the object itself is read instead
                        found[uid] = self._verified(records[uid], text.encode())
        alone = self.remote.get_records([p for uid, p in records.items() if uid not in found])
        for path, data in list(alone.items()):
            try:
                found[_uid(path)] = self._verified(path, data)
            except IntegrityError as e:
                refused.append(str(e))
                del alone[path]
        self._pack(alone)
        return list(found.values()), refused, read

    def _pack(self, signed: dict[str, bytes]) -> list[str]:
        """Write the records given (path: signed bytes) as packs of ``PACK``, each of one session's records in uid
        order; returns the paths of those packed (the rest are too few for a pack). A pack only spares a later
        pull requests: one that cannot be written now is not, and nothing fails for it."""
        by_session: dict[str, list[str]] = {}
        for path in sorted(signed, key=_uid):
            by_session.setdefault(path.rsplit("/", 1)[0], []).append(path)
        packed: list[str] = []
        for folder, paths in by_session.items():
            for i in range(0, len(paths) - PACK + 1, PACK):
                chunk = paths[i : i + PACK]
                body = {"records": {_uid(p): signed[p].decode() for p in chunk}}
                name = f"{folder}/packs/{_uid(chunk[0])}_{_uid(chunk[-1])}.json"
                try:
                    self.remote.put_bytes(name, json.dumps(body).encode())
                except RemoteError:
                    return packed
                packed.extend(chunk)
        return packed

    def _upload_blob(self, key: str) -> None:
        if not self.remote.blobs.has(key):  # immutable and content-addressed: never uploaded twice
            self.remote.blobs.write_file(key, self.store.blobs.path(key))
        self.catalog.mark_blobs_uploaded([key])

    def pull(self, session: str | None = None) -> list[int]:
        """Import the records of checkpoints this store has not seen (of one session, or all); returns their ids.

        A record that fails its signature is refused with an IntegrityError once the others are in.
        """
        with self._busy:
            known = self.catalog.known_uids()
            listed = self.remote.listing(self.remote.records_of(session))
            records, refused, _ = self._read_records(listed, lambda uid: uid not in known)
            imported = [self.catalog.import_record(r) for r in _parents_first(records)]
            if refused:
                raise IntegrityError(refused[0] + (f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""))
            return imported

    def fetch(self, checkpoint_id: int) -> None:
        """Download, in parallel, the blobs of a pulled checkpoint that are not here, check each and write it
        to the local tier; raises the first failure."""
        with self.fetched(checkpoint_id):
            for future in self._fetches:
                future.result()
        self.wait_fetched()

    @contextlib.contextmanager
    def fetched(self, checkpoint_id: int) -> Iterator[None]:
        """Inside the block, a pulled checkpoint's blobs are readable from the local tier (``restore_namespace``).

        Those missing are downloaded in parallel, in the order the checkpoint lists them, each checked once and
        held in memory, where a restore reads it as soon as it is here (a read waits for its blob), without reading
        it back from disk or checking it again: the restore runs while the rest comes. Once the block is left, a
        thread waits for the rest and writes them to the local tier (``wait_fetched``), and the checkpoint is local
        once all are written. Blobs that would take more than a quarter of the memory left are written as they come
        instead. A failure the restore did not read (a blob of a variable it left out) is said once, by that thread.
        """
        self.wait_fetched()
        missing = self.catalog.missing_blobs(checkpoint_id)
        if not missing and checkpoint_id not in self.catalog.remote_only():
            yield  # here already
            return
        room = headroom()
        write = room is not None and sum(missing.values()) > room.free // 4
        most = _most(self.store.manifest(checkpoint_id))  # signed: no download is longer than it says
        self._fetches = [self._pool.submit(self._fetch_blob, key, write, most.get(key)) for key in missing]
        self.store.blobs.fetching(dict(zip(missing, self._fetches, strict=True)))
        try:
            yield
        except BaseException:
            self._let_go()
            raise
        args = (checkpoint_id, list(missing), not write)
        self._keeping = threading.Thread(target=self._keep, args=args, name="jupyter-ckpt-fetched")
        self._keeping.start()

    def _let_go(self) -> None:
        """Stop the last fetch: what has not started is not downloaded, and what was is let go of once it is here."""
        for future in self._fetches:
            future.cancel()
        futures.wait(self._fetches)
        self.store.blobs.drop_fetched()

    def _fetch_blob(self, key: str, write: bool, most: int | None) -> None:
        self.store.blobs.hold_fetched(key, self.remote.blobs.read_file(key, most))
        if write:
            self.catalog.add_fetched_blobs([key])

    def _keep(self, checkpoint_id: int, keys: list[str], held: bool) -> None:
        """Once all of a fetch's blobs are here, write those ``held`` in memory to the local tier (the others were
        written as they came); the checkpoint is then local. A failure (a blob that failed its check or did not
        come, a full disk) is said once, what is held is let go, and the checkpoint stays to be fetched again."""
        try:
            for future in self._fetches:
                future.result()
            # They came from there, whole: the next push, whose record names most of them, need not look for them.
            self.catalog.mark_blobs_uploaded(keys)
            if held:
                self.catalog.add_fetched_blobs(keys)
            self.catalog.mark_local(checkpoint_id)
        except Exception as e:
            self._let_go()
            self._notify(f"jupyter-ckpt: checkpoint {checkpoint_id} was fetched but not kept here: {e}")
            return
        self.kept()

    def verify_remote(self, checkpoint_ids: Iterable[int]) -> list[str]:
        """Download the blobs of checkpoints only the remote store holds and check each (its header and its
        signature), keeping none: a problem for each that fails, naming its checkpoint."""
        owners: dict[str, list[int]] = {}
        most: dict[str, int] = {}
        for checkpoint_id in sorted(checkpoint_ids):
            try:
                most.update(_most(self.store.manifest(checkpoint_id)))
            except IntegrityError:  # named by the store's own verify: its blobs are not downloaded
                continue
            for key in self.catalog.missing_blobs(checkpoint_id):
                owners.setdefault(key, []).append(checkpoint_id)

        def check(key: str) -> str | None:
            try:
                self.store.blobs.check_file(key, self.remote.blobs.read_file(key, most.get(key)))
            except (IntegrityError, RemoteError) as e:
                return f"checkpoint(s) {', '.join(map(str, owners[key]))}: {e}"
            return None

        return [problem for problem in self._pool.map(check, owners) if problem is not None]

    def wait_fetched(self) -> None:
        """Block until the blobs of the last fetch are written to the local tier (or failed to be)."""
        if self._keeping is not None:
            self._keeping.join()

    def gc(self, grace: float = 24 * 3600) -> tuple[int, int]:
        """Delete remote blobs no record names, once older than ``grace`` seconds; returns (objects, bytes).

        A blob younger than the grace period may belong to a checkpoint still being
        uploaded, whose record comes last: it stays.
        """
        with self._busy:
            listed = self.remote.listing("sessions")
            records, _, read = self._read_records(listed, lambda uid: True)
            named = {key for record in records for key, _, _ in record["blobs"]}
            live = {_uid(p) for p in listed if not _is_pack(p)}
            # The packs the records were read from, as read; then those whose range holds no listed record.
            unread = self.remote.get_records(
                [p for p in listed if _is_pack(p) and p not in read and _size(listed[p]) <= RECORD_MAX]
            )
            packs = {**read, **{pack: _entries(data) for pack, data in unread.items()}}
            for pack, held in packs.items():  # one holding a deleted record goes, and the copy with it
                if not set(held) <= live:
                    self.remote.delete(pack)
            count = freed = 0
            now = time.time()
            for key, stat in self.remote.blobs.listing().items():
                if key in named or now - stat.modified < grace:
                    continue
                self.remote.blobs.delete(key)
                count += 1
                freed += stat.size
            return count, freed

    # -- the background thread -------------------------------------------------

    def start(self, session: str) -> None:
        """Pull ``session``, then push whenever poked, retrying with backoff while the remote is unreachable."""
        self.follow(session)
        self._thread = threading.Thread(target=self._run, name="jupyter-ckpt-upload", daemon=True)
        self._thread.start()

    def follow(self, session: str) -> None:
        """Pull ``session``'s timeline in the next round: the kernel's, or the one it moved to once its notebook
        was named (``pulled`` is clear until then)."""
        with self._done:
            self._pulling = session
            self.pulled.clear()
        self.poke()

    def poke(self) -> None:
        """A checkpoint was committed: upload it soon."""
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _run(self) -> None:
        delay = 0.0
        while not self._stop.is_set():
            with self._done:
                self._begun += 1
                session = self._pulling
            try:
                if session is not None:
                    self._pull_round(session)
                    # The timeline is in: a look at it, or the restore a kernel makes as it starts, does not wait
                    # for the uploads of a backlog (the checkpoints a crashed kernel left) that come next.
                    self._pulled(session)
                self.push()
            except Exception as e:
                self._failed(e)
                delay = min(max(2 * delay, 1.0), _MAX_DELAY)
            else:
                self._recovered()
                delay = 0.0
            finally:
                with self._done:
                    self._pulled(session)  # a failed pull is as full as the timeline gets until the next round
                    self._finished += 1
                    self._done.notify_all()
            self._wake.wait(delay or None)
            self._wake.clear()

    def _pulled(self, session: str | None) -> None:
        """The round's pull of ``session`` is over: ``pulled``, unless another session to pull came meanwhile."""
        with self._done:
            if self._pulling == session:
                self._pulling = None
                self.pulled.set()

    def _pull_round(self, session: str) -> None:
        """Pull a session; a record that fails its signature is said once and left out: the store is reachable,
        the other records are in, and the uploads go on."""
        try:
            self.pull(session)
        except IntegrityError as e:
            self._refused.tell(f"jupyter-ckpt: {e}", reason=str(e))

    def _failed(self, e: BaseException) -> None:
        message = self._why = str(e) if isinstance(e, RemoteError) else f"upload failed: {_reason(e)}"
        behind, _ = self.catalog.behind()
        self._trouble.tell(  # once, not at every retry, nor again for another request failing the same way
            f"jupyter-ckpt: {message}. Checkpoints go on locally ({behind} not uploaded yet) and are "
            "uploaded when it can be reached.",
            reason="unusable",
        )

    def _recovered(self) -> None:
        self._trouble.clear(
            f"jupyter-ckpt: the checkpoint store {self.url} is reachable again; the backlog is uploaded"
        )

    def flush(self, timeout: float | None = None) -> None:
        """Block until the remote holds every checkpoint committed here; raise RemoteError if it cannot."""
        if self._thread is None:
            self.push()
            return
        with self._done:
            target = self._begun + 1
            self.poke()
            if not self._done.wait_for(lambda: self._finished >= target, timeout):
                raise RemoteError(f"the checkpoint store {self.url} did not take the uploads in {timeout} s")
        if self.error is not None:
            raise RemoteError(self.error)

    def status(self) -> dict[str, Any]:
        behind, size = self.catalog.behind()
        return {"url": self.url, "behind": behind, "behind_bytes": size, "error": self.error}


def _modified(info: dict[str, Any], default: float) -> float:
    """When an object was written, from the details its filesystem lists (names differ between them)."""
    stamp: Any = info.get("LastModified") or info.get("mtime") or info.get("last_modified")
    if stamp is None:
        return default
    return float(stamp.timestamp() if hasattr(stamp, "timestamp") else stamp)


def _size(info: dict[str, Any]) -> int:
    """An object's size as its listing gives it."""
    return int(info.get("size") or 0)


def _most(manifest: Manifest) -> dict[str, int]:
    """The most bytes each blob file of a checkpoint can take, for those whose length its manifest records."""
    return {key: HEADER_MAX + size for key, size in blob_sizes(manifest).items()}


def _uid(path: str) -> str:
    """The uid a record's path names (``.../<uid>.json``)."""
    return path.rsplit("/", 1)[-1].removesuffix(".json")


def _is_pack(path: str) -> bool:
    return path.rsplit("/", 2)[-2:-1] == ["packs"]


def _holds(pack: str, uid: str) -> bool:
    """Whether a pack's uid range (``.../packs/<first>_<last>.json``) takes in ``uid``."""
    first, _, last = _uid(pack).partition("_")
    return first <= uid <= last


def _entries(data: bytes) -> dict[str, str]:
    """A pack's records (uid: signed text); none from a damaged one, whose records are then read alone."""
    try:
        records = json.loads(data)["records"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return {}
    return {k: v for k, v in records.items() if isinstance(v, str)} if isinstance(records, dict) else {}


def _parents_first(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records in the order they were made (a uid begins with its time), each after its parent when the parent
    is among them: the ids they get here, and so ``latest`` and the timeline's order, follow that order."""
    by_uid = {r["uid"]: r for r in records}
    ordered: list[dict[str, Any]] = []
    done: set[str] = set()
    for uid in sorted(by_uid):
        chain = []
        while uid in by_uid and uid not in done:  # its parents not imported yet, newest first
            done.add(uid)
            chain.append(by_uid[uid])
            uid = by_uid[uid]["parent"]
        ordered.extend(reversed(chain))
    return ordered

"""The remote tier's bookkeeping in the local catalog: what the object store holds, what it lacks, and what
was pulled from it without its blobs. ``remote.Replica`` moves the bytes and asks this what to move.

Its tables are the catalog's (``store._SCHEMA``), in the one SQLite file, read and written through the
store's connection and transactions::

    uids            every checkpoint's global id, whether its record is uploaded, whether its blobs are all here
    uploaded_blobs  the blobs the object store holds
    tombstones      the uids of checkpoints deleted or moved here, whose records the next push deletes

``Store`` writes the rows that must change with a checkpoint, in the same transaction: the uid at
``commit`` (the manifest's identity names it, ``store.IDENTITY``), the record marked for upload again at
``tag`` and ``move_session``, tombstones at ``delete`` and ``move_session``. A ``RemoteCatalog`` reads
them, and records what a push, a pull or a fetch did.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .blobs import BlobInfo
from .errors import IntegrityError, UnknownCheckpoint
from .store import Store, recorded


class RemoteCatalog:
    """The remote tier's rows of one store's catalog."""

    def __init__(self, store: Store) -> None:
        self.store = store

    # -- pushing ----------------------------------------------------------------

    def to_upload(self) -> list[tuple[int, str]]:
        """Checkpoints written here whose record the remote store does not hold yet, oldest first: (id, uid)."""
        rows = self.store._query(
            "SELECT checkpoint_id, uid FROM uids WHERE uploaded=0 AND local=1 ORDER BY checkpoint_id"
        )
        return [(r["checkpoint_id"], r["uid"]) for r in rows]

    def blobs_to_upload(self, checkpoint_id: int) -> list[str]:
        rows = self.store._query(
            "SELECT blob FROM refs WHERE checkpoint_id=? AND blob NOT IN (SELECT key FROM uploaded_blobs)",
            (checkpoint_id,),
        )
        return [r["blob"] for r in rows]

    def mark_blobs_uploaded(self, keys: Iterable[str]) -> None:
        """The remote store holds these blobs (uploaded from here, or fetched from there)."""
        with self.store._transaction() as db:
            db.executemany("INSERT OR IGNORE INTO uploaded_blobs VALUES (?)", [(key,) for key in keys])

    def mark_uploaded(self, checkpoint_id: int, uid: str) -> None:
        """The record is in the remote store (unless it changed since it was read: a tag set meanwhile)."""
        with self.store._transaction() as db:
            db.execute("UPDATE uids SET uploaded=1 WHERE checkpoint_id=? AND uid=?", (checkpoint_id, uid))

    def record(self, checkpoint_id: int) -> dict[str, Any]:
        """What the remote store keeps of one checkpoint: its row, signed manifest, blobs, parent's uid and
        the cells run since its parent (the parent's record has those before)."""
        rows = self.store._query(
            "SELECT c.*, s.key AS skey, u.uid, (SELECT uid FROM uids WHERE checkpoint_id = c.parent) AS parent_uid, "
            "(SELECT last_cell FROM checkpoints WHERE id = c.parent) AS parent_cell "
            "FROM checkpoints c JOIN sessions s ON s.id = c.session_id JOIN uids u ON u.checkpoint_id = c.id "
            "WHERE c.id=?",
            (checkpoint_id,),
        )
        if not rows:
            raise UnknownCheckpoint(f"no checkpoint {checkpoint_id}")
        row = rows[0]
        manifest = self.store.manifest(checkpoint_id)  # verified, and its row's: its uid, session and tag are signed
        cells = self.store.cells(manifest["last_cell"], after=row["parent_cell"])
        blobs = self.store._query(
            "SELECT r.blob AS key, COALESCE(b.size, 0) AS size, COALESCE(b.stored, 0) AS stored FROM refs r "
            "LEFT JOIN blobs b ON b.key = r.blob WHERE r.checkpoint_id=? ORDER BY r.blob",
            (checkpoint_id,),
        )
        return {
            "uid": manifest["uid"],
            "session": manifest["session"],
            "parent": manifest["parent_uid"],
            "tag": manifest.get("tag"),
            "new_bytes": row["new_bytes"],
            "manifest": row["manifest"],
            "mac": row["mac"],
            "blobs": [[b["key"], b["size"], b["stored"]] for b in blobs],
            "cells": [recorded(c) for c in cells],
        }

    def tombstones(self) -> list[str]:
        return [r["uid"] for r in self.store._query("SELECT uid FROM tombstones WHERE pushed=0")]

    def mark_tombstone_pushed(self, uid: str) -> None:
        with self.store._transaction() as db:
            db.execute("UPDATE tombstones SET pushed=1 WHERE uid=?", (uid,))

    def behind(self) -> tuple[int, int]:
        """How far the remote store is behind: checkpoints and bytes written here and not uploaded yet."""
        if not self.store._has_remote_tables():
            return 0, 0
        count = self.store._query("SELECT COUNT(*) AS n FROM uids WHERE uploaded=0 AND local=1")[0]["n"]
        size = self.store._query(
            "SELECT COALESCE(SUM(stored), 0) AS n FROM blobs WHERE key NOT IN (SELECT key FROM uploaded_blobs) "
            "AND key IN (SELECT blob FROM refs JOIN uids ON uids.checkpoint_id = refs.checkpoint_id "
            "WHERE uids.uploaded=0 AND uids.local=1)"
        )[0]["n"]
        return int(count), int(size)

    # -- pulling and fetching ---------------------------------------------------

    def known_uids(self) -> set[str]:
        """The uids a pull must not bring in: checkpoints here, and those deleted here."""
        rows = self.store._query("SELECT uid FROM uids UNION SELECT uid FROM tombstones")
        return {r["uid"] for r in rows}

    def id_of(self, uid: str) -> int | None:
        rows = self.store._query("SELECT checkpoint_id FROM uids WHERE uid=?", (uid,))
        return int(rows[0]["checkpoint_id"]) if rows else None

    def import_record(self, record: dict[str, Any]) -> int:
        """Add a checkpoint pulled from the remote store (record verified by the caller); returns its id here."""
        store = self.store
        manifest = store.manifest_text(record["manifest"], record["mac"], record["uid"])
        if (manifest.get("uid"), manifest.get("session")) != (record["uid"], record["session"]):
            raise IntegrityError(f"the remote record {record['uid']} holds another checkpoint's manifest")
        parent = self.id_of(record["parent"]) if record["parent"] else None
        last = store.last_cell(parent) if parent is not None else None
        for c in record["cells"]:
            last = store.add_cell(record["session"], last, c["count"], c["source"], c["status"], c["duration"])
        manifest["parent"], manifest["last_cell"], manifest["tag"] = parent, last, record["tag"]
        blobs = {k: BlobInfo(k, size, stored, new=False) for k, size, stored in record["blobs"]}
        return store.commit(record["session"], manifest, blobs, uid=record["uid"], new_bytes=record["new_bytes"])

    def remote_only(self) -> set[int]:
        """Checkpoints pulled from the remote store whose blobs are not all here."""
        if not self.store._has_remote_tables():
            return set()
        return {r["checkpoint_id"] for r in self.store._query("SELECT checkpoint_id FROM uids WHERE local=0")}

    def missing_blobs(self, checkpoint_id: int) -> dict[str, int]:
        """The blobs of a checkpoint pulled from the remote store that are not here yet, with their file sizes."""
        rows = self.store._query("SELECT local FROM uids WHERE checkpoint_id=?", (checkpoint_id,))
        if not rows or rows[0]["local"]:
            return {}
        rows = self.store._query(
            "SELECT refs.blob, blobs.stored FROM refs LEFT JOIN blobs ON blobs.key = refs.blob WHERE checkpoint_id=?",
            (checkpoint_id,),
        )
        return {r["blob"]: r["stored"] or 0 for r in rows if not self.store.blobs.has(r["blob"])}

    def add_fetched_blobs(self, keys: list[str]) -> None:
        """Write blob files fetched from the remote store, held in memory since they checked out
        (``LocalBlobs.hold_fetched``), to the local tier, together."""
        sizes = self.store.blobs.write_fetched(keys)
        with self.store._transaction() as db:
            db.executemany(  # a restore's checkpoint may have named them while they were held in memory, as 0 bytes
                "INSERT INTO blobs (key, size, stored) VALUES (?, ?, ?) "
                "ON CONFLICT (key) DO UPDATE SET size = excluded.size, stored = excluded.stored",
                [(key, size, stored) for key, (size, stored) in sizes.items()],
            )

    def mark_local(self, checkpoint_id: int) -> None:
        with self.store._transaction() as db:
            db.execute("UPDATE uids SET local=1 WHERE checkpoint_id=?", (checkpoint_id,))

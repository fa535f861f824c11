"""The stored timeline: one front door for every surface that reads or maintains it.

``Timeline`` owns every verb that needs the store but not a live namespace: the
sessions and their checkpoints, numbered from 1 (``#N``); what a REF names
(ids, ``#N``, ``-N``, ``latest``, ``last-good``, ``previous``, tags); which
checkpoints hold a good state; one checkpoint's details and the cells that led
to it; tag and delete; thinning and gc; the tree rows a timeline is drawn from.
The kernel's ``Checkpointer``, the server's ``CheckpointService``, the widget
and the command line all call it; the ``Checkpointer`` keeps only what needs the
live namespace (taking checkpoints, and going back to one).

A checkpoint that changed nothing (a restore entry, a cell that only printed)
holds the state of its parent: ``state_of`` is that rule, and undo (``-N``), the
good states (``last-good``, crash recovery) and thinning all use it.

Thinning keeps recent checkpoints dense and older ones sparse: walking a
session's timeline back from its newest checkpoint, one is kept per
power-of-two window of age (1, 2, 4, 8, ... checkpoints back); the others go
first, oldest first, then the kept ones, until the store fits. Never thinned:
tagged checkpoints (savepoints), each session's newest checkpoint and its two
newest good states (crash recovery restores the newest, and the one before it if
the kernel dies again), each running (or lately dead) kernel's newest checkpoint
and the newest good state of its line of work (two kernels on one notebook each
get their own back after a crash), what stands for those states, and what a kernel
protects (its head). Unreferenced blobs go after, with ``Store.gc``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from numbers import Integral
from typing import Any

from .errors import BadArgument, CheckpointError, UnknownCheckpoint, UnknownSession
from .manifest import Manifest
from .restore import diff_manifests
from .session import kernel_heads
from .store import CheckpointRecord, Store, parse_id, recorded
from .writer import adopt

_NOTHING: Manifest = {"variables": {}, "modules": {}}


def numbers(records: Iterable[CheckpointRecord]) -> dict[int, int]:
    """Each checkpoint's number in its session, from 1, of ``records`` as ``Store.checkpoints`` orders them (oldest
    first): ``#N`` in a REF, the UI and the lists."""
    return {r.id: n for n, r in enumerate(records, start=1)}


def ref_text(ref: str | int) -> str:
    """A REF as text; anything but an id (int) or a string (``restore(None)``, ``diff(3.5)``, ``True``) is refused,
    where its text would have been looked up as a tag."""
    if isinstance(ref, bool) or not isinstance(ref, (str, Integral)):  # numpy's integers are ids too
        raise BadArgument(f"a REF is a checkpoint id (int) or text (a tag, latest, -1), not {type(ref).__name__}")
    return ref.strip() if isinstance(ref, str) else str(int(ref))


def steps_back(ref: str | int) -> int | None:
    """N of a REF ``-N`` (N states back from the head); None for any other REF."""
    text = ref_text(ref)
    if not re.fullmatch(r"-\d+", text):
        return None
    if not (steps := int(text[1:])):
        raise BadArgument(f"{text} is no step back: -1 is the state before the last cell, -2 the one before")
    return steps


def state_of(record: CheckpointRecord, by_id: dict[int, CheckpointRecord]) -> CheckpointRecord:
    """The checkpoint whose state ``record`` holds: itself, or, for one that changed nothing (a restore entry, a
    cell that only printed), the nearest ancestor in ``by_id`` that did. Parent links made into a loop by hand in
    the catalog end the walk where it comes round."""
    seen = {record.id}
    while not record.changed and record.parent in by_id and record.parent not in seen:
        record = by_id[record.parent]
        seen.add(record.id)
    return record


def good_states(records: list[CheckpointRecord]) -> list[int]:
    """A session's distinct states that finished without error, newest first: for each checkpoint that did, the
    one whose state it holds (itself when that one finished with an error)."""
    by_id = {r.id: r for r in records}
    states: list[int] = []
    for r in reversed(records):
        if r.status != "ok":
            continue
        holder = state_of(r, by_id)
        state = holder.id if holder.status == "ok" else r.id
        if state not in states:
            states.append(state)
    return states


def lineage(records: list[CheckpointRecord], head: int | None) -> list[CheckpointRecord]:
    """The checkpoints of one kernel's line of work, oldest first: ``head`` (its newest known), what it came from,
    and what followed it by cells (not by a restore: another kernel going back to this state, a crash restore);
    all of ``records`` if ``head`` is not among them. Two kernels on one notebook each have their own."""
    by_id = {r.id: r for r in records}
    if head not in by_id:
        return records
    line: set[int] = set()
    record: CheckpointRecord | None = by_id[head]
    while record is not None and record.id not in line:
        line.add(record.id)
        record = by_id.get(record.parent) if record.parent is not None else None
    children: dict[int | None, list[int]] = {}
    for r in records:
        if r.trigger not in ("restore", "crash-restore"):
            children.setdefault(r.parent, []).append(r.id)
    after = [head]
    while after:
        for child in children.get(after.pop(), []):
            if child not in line:
                line.add(child)
                after.append(child)
    return [r for r in records if r.id in line]


def tree_rows(records: list[CheckpointRecord]) -> list[dict[str, Any]]:
    """The records in timeline order, each with its ``number`` in the session, ``depth`` (its branch's indent)
    and ``branch_from``: what the sidebar and the widget draw.

    A checkpoint's first child continues its line; every later child (a restore
    followed by new cells) starts a branch one level deeper, listed after the
    line it left.
    """
    numbered = numbers(records)
    children: dict[int | None, list[CheckpointRecord]] = {}
    known = {r.id for r in records}
    for r in records:
        children.setdefault(r.parent if r.parent in known else None, []).append(r)
    rows: list[dict[str, Any]] = []
    # Depth-first, later branches pushed first so the first child comes out next.
    stack: list[tuple[CheckpointRecord, int, int | None]] = [(r, 0, None) for r in reversed(children.get(None, []))]
    while stack:
        record, depth, branch_from = stack.pop()
        rows.append({**record.as_dict(), "number": numbered[record.id], "depth": depth, "branch_from": branch_from})
        kids = children.get(record.id, [])
        stack.extend((kid, depth + 1, record.id) for kid in reversed(kids[1:]))
        if kids:
            stack.append((kids[0], depth, None))
    return rows


def never_thinned(records: list[CheckpointRecord], good_kept: int = 2, heads: Collection[int] = ()) -> set[int]:
    """The checkpoints of one session that thinning keeps: tagged ones, the newest, the ``good_kept`` newest good
    states (two: what crash recovery tries), each of ``heads`` (kernels' newest checkpoints,
    ``session.kernel_heads``) with the newest good state of its kernel's line (what that kernel's crash recovery
    restores, whatever other kernels on the notebook did since), and the checkpoints that hold those states too
    (restore entries: they reference the same blobs)."""
    if not records:
        return set()
    by_id = {r.id: r for r in records}
    mine = [h for h in heads if h in by_id]
    good = set(good_states(records)[:good_kept]) | {s for h in mine for s in good_states(lineage(records, h))[:1]}
    keep = {r.id for r in records if r.tag} | {records[-1].id} | good | set(mine)
    return keep | {r.id for r in records if state_of(r, by_id).id in good}


def drop_order(records: list[CheckpointRecord], keep: set[int]) -> tuple[list[int], list[int]]:
    """One session's checkpoints that may go: (the extras beyond one per power-of-two window of age,
    the ones kept for their window), each oldest first. ``records`` are oldest first."""
    extras: list[int] = []
    spares: list[int] = []
    windows: set[int] = set()
    for n, r in enumerate(reversed(records), start=1):
        window = n.bit_length()
        if r.id in keep:
            windows.add(window)
        elif window in windows:
            extras.append(r.id)
        else:
            windows.add(window)
            spares.append(r.id)
    return extras[::-1], spares[::-1]


@dataclass
class Thinned:
    """What one thinning pass removed."""

    checkpoints: int
    files: int
    freed: int
    sessions: dict[str, int]


def _preview(info: dict[str, Any]) -> dict[str, Any]:
    """A manifest entry without its storage keys: type, size, shape, repr."""
    return {k: v for k, v in info.items() if k not in ("group", "gkey")}


class Timeline:
    """The checkpoints a store holds, as every surface reads and maintains them (see the module's docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    # -- sessions and their checkpoints ---------------------------------------------

    def sessions(self) -> list[dict[str, Any]]:
        return self.store.sessions()

    def checkpoints(self, session: str) -> list[CheckpointRecord]:
        """A session's checkpoints, oldest first; UnknownSession if it has none."""
        return self.store.checkpoints(session)

    def committed(self, session: str) -> list[CheckpointRecord]:
        """A session's checkpoints, oldest first; none for a session not in the store yet."""
        try:
            return self.store.checkpoints(session)
        except UnknownSession:
            return []

    def number(self, session: str, checkpoint_id: int) -> int | None:
        """A checkpoint's number in its session (the REF ``#N``)."""
        return numbers(self.committed(session)).get(checkpoint_id)

    # -- REFs -------------------------------------------------------------------

    def resolve(
        self, session: str, ref: str | int, *, head: int | None = None, mine: Iterable[int] = ()
    ) -> CheckpointRecord:
        """The checkpoint of ``session`` a REF names: an id, ``#N`` (its number), a tag, ``latest``,
        ``last-good`` (the newest good state), ``-N`` (N different states back from ``head`` along the parent
        links) or ``previous`` (the newest good state of the kernels before this one: of checkpoints not
        in ``mine``)."""
        text = ref_text(ref)
        records = self.committed(session)
        if text == "previous":
            previous = self.previous(session, mine)
            if previous is None:
                raise UnknownCheckpoint("no earlier kernel of this session left a checkpoint that ran without error")
            return previous
        if not records:
            raise UnknownCheckpoint(f"session {session!r} has no checkpoints yet")
        by_id = {r.id: r for r in records}
        if text == "latest":
            return records[-1]
        if text == "last-good":
            good = good_states(records)
            if not good:
                raise UnknownCheckpoint("no checkpoint of this session finished without error")
            return by_id[good[0]]
        if re.fullmatch(r"#\d+", text):
            if 1 <= (n := int(text[1:])) <= len(records):
                return records[n - 1]
            raise UnknownCheckpoint(f"no checkpoint {text} in session {session!r}: it has {len(records)}")
        if (steps := steps_back(text)) is not None:
            current = by_id.get(head, records[-1]) if head is not None else records[-1]
            passed = {current.id}  # parent links made into a loop by hand come round: no state is further back
            for _ in range(steps):
                current = state_of(current, by_id)  # one step back is to the last *different* state
                if current.parent not in by_id or current.parent in passed:
                    where = f"after cell {current.cell}" if current.cell is not None else "a state with no cell"
                    raise UnknownCheckpoint(
                        f"the timeline does not reach {steps} state(s) back: the oldest it reaches is "
                        f"#{numbers(records)[current.id]} ({where}), and no state before it was checkpointed"
                    )
                current = by_id[current.parent]
                passed.add(current.id)
            return current
        if (cid := parse_id(text)) is not None:
            if cid in by_id:
                return by_id[cid]
            raise UnknownCheckpoint(f"no checkpoint {text} in session {session!r}")
        for r in records:
            if r.tag == text:
                return r
        raise UnknownCheckpoint(f"no checkpoint or tag {text!r} in session {session!r}")

    def find(self, ref: str, session: str | None) -> CheckpointRecord:
        """What the command line names: a REF of ``session``, or, without one, a checkpoint id of any session (or a
        REF of the store's one session)."""
        ref = ref_text(ref)  # " 12" is the id 12 to a kernel: it was no id here
        if ref == "previous":
            raise BadArgument(
                "'previous' names what the kernels before a running one left: in a kernel only (here, use last-good)"
            )
        if session:
            self.store.checkpoints(session)  # UnknownSession: not "no checkpoints yet", as for a kernel's new one
            return self.resolve(session, ref)
        cid = parse_id(ref)
        if cid is not None:
            return self.store.get(cid)
        sessions = self.sessions()
        if len(sessions) == 1:  # a store of one notebook: its tags, #N and latest need no --session
            return self.resolve(sessions[0]["key"], ref)
        raise BadArgument(
            f"{ref!r} is not a checkpoint id, and the store holds {len(sessions)} sessions; give --session to use a "
            "tag, #N or latest"
        )

    def previous(self, session: str, mine: Iterable[int]) -> CheckpointRecord | None:
        """The newest good state the kernels before this one left (the REF ``previous``): of the checkpoints not
        in ``mine``, whatever this kernel has done since."""
        mine = set(mine)
        records = [r for r in self.committed(session) if r.id not in mine]
        good = good_states(records)
        return next((r for r in records if r.id == good[0]), None) if good else None

    # -- reading one checkpoint -----------------------------------------------------

    def cells_between(self, parent: Manifest, manifest: Manifest) -> list[dict[str, Any]]:
        """The cells executed from the parent's state to this checkpoint's, oldest first (verified)."""
        cells = self.store.history(manifest)
        ids = [c["id"] for c in cells]
        last = parent.get("last_cell")
        start = ids.index(last) + 1 if last is not None and last in ids else 0
        return [recorded(c) for c in cells[start:]]

    def details(self, checkpoint_id: int) -> dict[str, Any]:
        """One checkpoint's record, variable previews, cells and diff to its parent, read from the store alone."""
        record = self.store.get(checkpoint_id)
        manifest = self.store.manifest(checkpoint_id)
        try:
            parent = self.store.manifest(record.parent) if record.parent is not None else _NOTHING
        except CheckpointError:  # a parent deleted meanwhile: compare with nothing
            parent = _NOTHING
        diff = diff_manifests(parent, manifest)
        return {
            **record.as_dict(),
            "variables": {n: _preview(v) for n, v in manifest["variables"].items()},
            "modules": manifest["modules"],
            "skipped": manifest["skipped"],
            "cells": self.cells_between(parent, manifest),
            "versions": manifest["versions"],
            "diff": {
                "added": {n: _preview(v) for n, v in diff.added.items()},
                "removed": {n: _preview(v) for n, v in diff.removed.items()},
                "changed": {n: {"before": _preview(a), "after": _preview(b)} for n, (a, b) in diff.changed.items()},
            },
        }

    # -- changing it ----------------------------------------------------------------

    def tag(self, checkpoint_id: int, tag: str | None) -> CheckpointRecord:
        """Tag a checkpoint (None: untag it); its record."""
        self.store.tag(checkpoint_id, tag)
        return self.store.get(checkpoint_id)

    def delete(self, checkpoint_ids: list[int]) -> None:
        self.store.delete(checkpoint_ids)

    def thin(
        self,
        sessions: Iterable[str],
        *,
        keep_last: int = 0,
        sparse: bool = False,
        target: int | None = None,
        protect: Iterable[int] = (),
        pending: Collection[str] = (),
        measure: Callable[[], int] | None = None,
    ) -> Thinned:
        """Thin the checkpoints of ``sessions``, then collect the blobs nothing references.

        The newest ``keep_last`` of each session stay, and so does what ``never_thinned``
        names and ``protect``. ``sparse`` drops every extra beyond one per window of age;
        ``target`` then drops more, in the drop order, until the referenced bytes fit it (``measure``: until
        what it measures does, e.g. the bytes of one session's checkpoints).
        ``pending``: sessions whose next checkpoint this makes room for. It will be their
        newest good state, so of theirs only the newest good state stays (crash recovery's
        second): keeping two, a budget of less than three checkpoints took no third.
        """
        if keep_last < 0:
            raise BadArgument("--keep-last cannot be negative")
        adopt(self.store)  # a killed kernel's last state, which its writer finished: kept, as its newest
        keep = set(protect)
        heads = kernel_heads(self.store.root, self.store.unseal)
        extras: list[tuple[int, str]] = []
        spares: list[tuple[int, str]] = []
        for key in sessions:
            records = self.committed(key)
            older = records[: max(len(records) - keep_last, 0)]
            e, s = drop_order(older, keep | never_thinned(records, 1 if key in pending else 2, heads))
            extras += [(cid, key) for cid in e]
            spares += [(cid, key) for cid in s]
        doomed: list[tuple[int, str]] = []
        if sparse:
            doomed, extras = sorted(extras), []
        # Another gc (a kernel's thinning, the command line) may have deleted some since they were listed: it failed
        # this one with "no checkpoint 7078".
        gone = set(self.store.delete([cid for cid, _ in doomed], missing_ok=True))
        doomed = [(cid, key) for cid, key in doomed if cid in gone]
        if target is not None:
            for cid, key in sorted(extras) + sorted(spares):
                if (measure or self.store.referenced_size)() <= target:
                    break
                if self.store.delete([cid], missing_ok=True):
                    doomed.append((cid, key))
        files, freed = self.store.gc()
        return Thinned(len(doomed), files, freed, dict(Counter(key for _, key in doomed)))

    def gc(
        self,
        sessions: Iterable[str] | None,
        keep_last: int,
        max_size: int | None,
        protect: Iterable[int] = (),
        measure: Callable[[], int] | None = None,
    ) -> Thinned:
        """What ``gc`` does from every surface: thin ``sessions`` (None: all of them), keeping the newest
        ``keep_last`` of each and one per power-of-two window of age before them, then more until the store
        (or what ``measure`` measures) fits ``max_size``; then drop unreferenced blobs."""
        chosen = [s["key"] for s in self.sessions()] if sessions is None else list(sessions)
        return self.thin(chosen, keep_last=keep_last, sparse=True, target=max_size, protect=protect, measure=measure)

    # -- what a new kernel offers ---------------------------------------------------------

    def resume_offer(self, session: str, mine: Iterable[int]) -> dict[str, Any] | None:
        """What a kernel offers to bring back when it starts on a notebook with history: the last good state the
        kernels before it left (the REF ``previous``); None if there is none."""
        previous = self.previous(session, mine)
        if previous is None:
            return None
        return {
            "checkpoint": previous.id,
            "number": self.number(session, previous.id),
            "cell": previous.cell,
            "time": previous.time,
            "variables": len(self.store.manifest(previous.id)["variables"]),
            "checkpoints": len(self.committed(session)),
        }

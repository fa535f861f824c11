"""The stored timeline's rules, as every surface uses them through ``Timeline``: REFs, good states, the tree."""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Any

import pytest

from jupyter_ckpt.errors import BadArgument, UnknownCheckpoint
from jupyter_ckpt.store import NEW_KERNEL, Store
from jupyter_ckpt.timeline import Timeline, good_states, never_thinned, tree_rows


def manifest(
    parent: int | None = None, status: str = "ok", changed: tuple[str, ...] = ("x",), **extra: Any
) -> dict[str, Any]:
    return {
        "parent": parent,
        "time": time.time(),
        "cell": 1,
        "last_cell": None,
        "trigger": "cell",
        "status": status,
        "changed": list(changed),
        "variables": {},
        **extra,
    }


def test_refs_resolve_and_unknown_refs_are_clear(store: Store) -> None:
    a = store.commit("nb.ipynb", manifest(), {})
    b = store.commit("nb.ipynb", manifest(parent=a, status="error"), {})
    store.tag(a, "baseline")
    timeline = Timeline(store)
    assert timeline.resolve("nb.ipynb", "latest").id == b
    assert timeline.resolve("nb.ipynb", "last-good").id == a
    assert timeline.resolve("nb.ipynb", "baseline").id == a
    assert timeline.resolve("nb.ipynb", "#2").id == b
    assert timeline.resolve("nb.ipynb", "-1", head=b).id == a
    assert timeline.resolve("nb.ipynb", "previous", mine=[b]).id == a
    for bad in ("999", "nope", "-5", "#3"):
        with pytest.raises(UnknownCheckpoint):
            timeline.resolve("nb.ipynb", bad, head=b)
    with pytest.raises(UnknownCheckpoint, match="no earlier kernel"):
        timeline.resolve("nb.ipynb", "previous", mine=[a, b])
    assert timeline.find(str(b), None).id == b  # the command line: an id needs no session
    assert timeline.find("baseline", None).id == a  # nor a REF, in a store of one notebook
    store.commit("other.ipynb", manifest(), {})
    with pytest.raises(BadArgument, match="the store holds 2 sessions; give --session"):
        timeline.find("baseline", None)
    assert timeline.find(f" {b} ", None).id == b  # as a kernel reads it: it was "not a checkpoint id" here


def test_a_checkpoint_that_changed_nothing_holds_its_parents_state_for_undo_good_states_and_thinning(
    store: Store,
) -> None:
    """One rule: a restore entry, or a cell that only printed, is the state of the checkpoint before it."""
    a = store.commit("nb.ipynb", manifest(), {})
    b = store.commit("nb.ipynb", manifest(parent=a), {})
    printed = store.commit("nb.ipynb", manifest(parent=b, changed=()), {})
    entry = store.commit("nb.ipynb", manifest(parent=a, changed=(), trigger="restore"), {})
    timeline = Timeline(store)
    records = timeline.checkpoints("nb.ipynb")
    # Undo from the cell that only printed skips back over it to the state before b.
    assert timeline.resolve("nb.ipynb", "-1", head=printed).id == a
    # The restore entry stands for a, the printing cell for b: two distinct good states, newest first.
    assert good_states(records) == [a, b]
    assert timeline.resolve("nb.ipynb", "last-good").id == a
    # What stands for a kept state is kept with it.
    assert {a, b, printed, entry} <= never_thinned(records)


def test_a_checkpoint_that_changed_nothing_keeps_its_state_when_its_parent_is_deleted(store: Store) -> None:
    """c only printed: it holds b's state. With b deleted, c hangs from a, and is still b's state, not a's."""
    a = store.commit("nb.ipynb", manifest(changed=("x",)), {})
    b = store.commit("nb.ipynb", manifest(parent=a, changed=("x",)), {})
    c = store.commit("nb.ipynb", manifest(parent=b, changed=()), {})
    d = store.commit("nb.ipynb", manifest(parent=c, changed=()), {})
    store.delete([b, c])
    timeline = Timeline(store)
    assert [(r.id, r.parent, r.changed) for r in timeline.checkpoints("nb.ipynb")] == [(a, None, ["x"]), (d, a, ["x"])]
    assert good_states(timeline.checkpoints("nb.ipynb")) == [d, a]
    assert store.manifest(d)["changed"] == ["x"]  # signed again with it


def test_tree_rows_branch_and_carry_where_kernels_started(store: Store) -> None:
    a = store.commit("nb.ipynb", manifest(), {})
    b = store.commit("nb.ipynb", manifest(parent=a), {})
    branch = store.commit(
        "nb.ipynb", manifest(parent=a, changed=(), trigger="restore", message=NEW_KERNEL + f"restored {a}"), {}
    )
    after = store.commit("nb.ipynb", manifest(parent=branch), {})
    rows = tree_rows(Timeline(store).checkpoints("nb.ipynb"))
    assert [(r["id"], r["number"], r["depth"], r["branch_from"]) for r in rows] == [
        (a, 1, 0, None),
        (b, 2, 0, None),
        (branch, 3, 1, a),
        (after, 4, 1, None),
    ]
    assert [r["kernel_start"] for r in rows] == [True, False, True, False]


def test_parent_links_made_into_a_loop_by_hand_end_every_walk(store: Store) -> None:
    """The parent column is not signed (a manifest names its own parent, and a restore refuses the one that differs),
    but everything that walks the timeline reads it: two checkpoints that changed nothing (restore entries) made each
    other's parent sent ``last-good``, an undo, the crash restore's choice and thinning round the loop forever, and a
    step back of -99999999999999 round a loop of any checkpoints."""
    a = store.commit("nb.ipynb", manifest(), {})
    b = store.commit("nb.ipynb", manifest(parent=a, changed=()), {})
    c = store.commit("nb.ipynb", manifest(parent=b, changed=()), {})
    with sqlite3.connect(store.root / "catalog.sqlite", isolation_level=None) as db:
        db.execute("UPDATE checkpoints SET parent=? WHERE id=?", (c, b))
    timeline = Timeline(store)
    outcome: list[Any] = []

    def walks() -> None:
        records = timeline.checkpoints("nb.ipynb")
        outcome.append(good_states(records))
        outcome.append(never_thinned(records))
        outcome.append(timeline.resolve("nb.ipynb", "last-good").id)
        with pytest.raises(UnknownCheckpoint, match="does not reach 99999999999999 state"):
            timeline.resolve("nb.ipynb", "-99999999999999", head=c)
        outcome.append(timeline.gc(None, 0, None).checkpoints)

    thread = threading.Thread(target=walks, daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "a walk of the timeline went round the loop"
    assert len(outcome) == 4 and outcome[2] in (b, c), outcome


def test_status_tag_and_changes_edited_in_the_catalog_do_not_steer_what_is_restored(store: Store) -> None:
    """A checkpoint's row holds its status, tag and changed names beside its signed manifest, and they choose what
    ``last-good``, ``previous``, a tag, ``-N``, crash recovery and thinning take. Edited by someone without the
    secret (a cell's broken state marked ``ok``, the good one marked ``error``, a tag moved, a state said to change
    nothing), they made a restore pick the state a cell had left broken. The signed values are used instead."""
    good = store.commit("nb.ipynb", manifest(), {})
    broken = store.commit("nb.ipynb", manifest(parent=good, status="error"), {})
    store.tag(good, "baseline")
    with sqlite3.connect(store.root / "catalog.sqlite", isolation_level=None) as db:
        db.execute("UPDATE checkpoints SET status='error', tag=NULL, changed='[]' WHERE id=?", (good,))
        db.execute("UPDATE checkpoints SET status='ok', tag='baseline' WHERE id=?", (broken,))
    timeline = Timeline(store)
    records = timeline.checkpoints("nb.ipynb")
    assert [(r.id, r.status, r.tag, r.changed) for r in records] == [
        (good, "ok", "baseline", ["x"]),
        (broken, "error", None, ["x"]),
    ]
    assert good_states(records) == [good]
    assert timeline.resolve("nb.ipynb", "last-good").id == good
    assert timeline.resolve("nb.ipynb", "previous", mine=[]).id == good
    assert timeline.resolve("nb.ipynb", "baseline").id == good
    assert timeline.resolve("nb.ipynb", "-1", head=broken).id == good
    assert good in never_thinned(records)
    assert store.verify() == [
        f"checkpoint {cid}: its row in the catalog was changed by hand; what its signed manifest says is used "
        "(jupyter ckpt verify --repair writes it back)"
        for cid in (good, broken)
    ]
    store.tag(broken, "after")  # a tag set again is signed with what the manifest says, not the edited columns
    assert [(r.status, r.tag) for r in timeline.checkpoints("nb.ipynb")] == [("ok", "baseline"), ("error", "after")]

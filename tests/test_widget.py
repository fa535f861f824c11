"""The %checkpoint timeline widget, driven the way its browser half drives it: traits and messages."""

from __future__ import annotations

import time
import types
from collections.abc import Iterator

import pytest

from jupyter_ckpt.checkpointer import Checkpointer, Policy
from jupyter_ckpt.store import Store
from jupyter_ckpt.widget import Timeline


@pytest.fixture
def ckpt(store: Store) -> Checkpointer:
    return Checkpointer(store, "analysis.ipynb", types.ModuleType("__main__"), policy=Policy(every=1))


@pytest.fixture
def timeline(ckpt: Checkpointer) -> Iterator[Timeline]:
    widget = Timeline(ckpt, poll=0.05)
    yield widget
    widget.close()


def run(ckpt: Checkpointer, count: int, code: str) -> int:
    """Run a cell in the module and checkpoint it, as the cell hooks do."""
    exec(code, ckpt.module.__dict__)
    cid = ckpt.after_cell(count, code, True, 0.0)
    assert cid is not None
    return cid


def click(timeline: Timeline, action: str, checkpoint: int, **extra: str) -> None:
    timeline._handle_custom_msg({"action": action, "id": checkpoint, **extra}, [])


def wait_for(condition: object, timeout: float = 5.0) -> None:
    deadline = time.time() + timeout
    while not condition():  # type: ignore[operator]
        assert time.time() < deadline, "the timeline did not update"
        time.sleep(0.02)


def test_new_checkpoints_appear_without_being_asked(ckpt: Checkpointer, timeline: Timeline) -> None:
    assert timeline.rows == []
    run(ckpt, 1, "x = 1")
    run(ckpt, 2, "y = [1, 2, 3]")
    wait_for(lambda: len(timeline.rows) == 2)
    # pytest names the test's phase in PYTEST_CURRENT_TEST: to the first checkpoint, the environment changed since
    # the fixture made the Checkpointer.
    assert [(r["cell"], r["trigger"], r["status"], r["changed"]) for r in timeline.rows] == [
        (1, "cell", "ok", ["os.environ", "x"]),
        (2, "cell", "ok", ["y"]),
    ]
    assert timeline.head == timeline.rows[-1]["id"]


def test_selecting_shows_previews_and_what_changed(ckpt: Checkpointer, timeline: Timeline) -> None:
    run(ckpt, 1, "import numpy as np\nx = np.zeros((3, 4))\nname = 'before'")
    second = run(ckpt, 2, "name = 'after'\ny = 2")
    timeline.selected = second
    d = timeline.details
    assert d["variables"]["x"]["shape"] == [3, 4]
    assert d["variables"]["name"]["repr"] == "'after'"
    assert "gkey" not in d["variables"]["x"]
    assert list(d["diff"]["added"]) == ["y"]
    assert d["diff"]["changed"]["name"] == {
        "before": {**d["diff"]["changed"]["name"]["before"], "repr": "'before'"},
        "after": {**d["diff"]["changed"]["name"]["after"], "repr": "'after'"},
    }
    assert d["diff"]["removed"] == {}


def test_restore_from_the_widget_rolls_the_namespace_back(ckpt: Checkpointer, timeline: Timeline) -> None:
    first = run(ckpt, 1, "x = 1")
    run(ckpt, 2, "x = 2\nz = 3")
    click(timeline, "restore", first)
    assert ckpt.module.x == 1
    assert "z" not in ckpt.module.__dict__
    assert timeline.message.startswith(f"restored kernel checkpoint #1 (id {first})")
    assert not timeline.error
    restore_row = timeline.rows[-1]
    assert (restore_row["trigger"], restore_row["branch_from"], restore_row["depth"]) == ("restore", first, 1)
    assert timeline.head == restore_row["id"]


def test_tag_and_delete(ckpt: Checkpointer, timeline: Timeline) -> None:
    first = run(ckpt, 1, "x = 1")
    second = run(ckpt, 2, "x = 2")
    click(timeline, "tag", first, tag="baseline")
    assert timeline.rows[0]["tag"] == "baseline"
    assert ckpt.resolve("baseline").id == first
    timeline.selected = second
    click(timeline, "delete", second)
    assert [r["id"] for r in timeline.rows] == [first]
    assert timeline.selected is None
    assert timeline.details == {}


def test_a_refused_action_is_reported_and_changes_nothing(ckpt: Checkpointer, timeline: Timeline) -> None:
    first = run(ckpt, 1, "x = 1")
    click(timeline, "tag", first, tag="latest")
    assert timeline.error
    assert "cannot be a tag" in timeline.message
    assert timeline.rows[0]["tag"] is None


def test_a_message_naming_no_checkpoint_or_one_gone_is_reported(ckpt: Checkpointer, timeline: Timeline) -> None:
    """A message without an id raised KeyError in the kernel, and selecting a checkpoint deleted meanwhile
    raised out of the trait's observer; both are said in the widget, as a refused action is."""
    first = run(ckpt, 1, "x = 1")
    timeline._handle_custom_msg({"action": "restore"}, [])
    assert timeline.error and "names no checkpoint" in timeline.message
    timeline.selected = first + 100
    assert timeline.error and f"no checkpoint {first + 100}" in timeline.message and timeline.details == {}
    assert ckpt.module.x == 1


def test_branches_are_indented_under_the_checkpoint_they_left(ckpt: Checkpointer, timeline: Timeline) -> None:
    a = run(ckpt, 1, "x = 1")
    b = run(ckpt, 2, "x = 2")
    ckpt.restore(a)
    c = run(ckpt, 3, "x = 30")
    timeline.refresh()
    rows = [(r["id"], r["depth"], r["branch_from"]) for r in timeline.rows]
    restored = rows[2][0]
    assert rows == [(a, 0, None), (b, 0, None), (restored, 1, a), (c, 1, None)]

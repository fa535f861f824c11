"""Replay: which cells rebuild a variable a checkpoint could not hold, and running them without harm."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_ckpt.recipes import cell_names, exec_cell, plan, run_recipe


def cells(*sources: str, failed: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    return [
        {"count": i + 1, "source": s, "status": "error" if i + 1 in failed else "ok"} for i, s in enumerate(sources)
    ]


def test_a_cell_is_read_for_what_it_binds_reads_and_mutates() -> None:
    names = cell_names(
        "%matplotlib inline\nimport numpy as np\nfrom os import path as p\nrows = [r for r in src]\n"
        "def f(x):\n    global total\n    y = x\n    return y\nclass K: pass\nrows.append(1)\nd['k'] = 2\n"
        "obj.attr += 1\nframe.sort_values('a', inplace=True)\nfor i in range(3):\n    pass\n!ls"
    )
    assert names.bound == {"np", "p", "rows", "f", "K", "i"}
    assert {"src", "range", "rows", "d", "obj", "frame"} <= names.read
    assert "r" not in names.bound and "y" not in names.bound and "x" not in names.bound
    assert names.mutated == {"total", "rows", "d", "obj", "frame"}
    assert cell_names("%%bash\necho hi") == cell_names("def broken(:")  # neither is Python: no names


def test_the_recipe_is_the_last_binding_cell_and_the_cells_that_used_it_since() -> None:
    history = cells(
        "conn = connect(1)",
        "conn = connect(2)\nn = 0",
        "n += 1",
        "conn.execute('create')",
        "rows = conn.execute('select').fetchall()",
    )
    recipe = plan(["conn"], history)
    assert [c["count"] for c in recipe.cells] == [2, 4, 5] and recipe.runnable == ["conn"]
    assert plan(["ghost"], history).problems == {"ghost": "no recorded cell assigns it"}
    failed = plan(["conn"], cells("conn = connect()", "conn.execute('x')", failed=(2,)))
    assert failed.runnable == [] and "never runs a failed cell" in failed.problems["conn"]


def test_replay_takes_only_the_missing_variables_and_never_changes_restored_ones() -> None:
    namespace: dict[str, Any] = {"base": [1, 2], "kept": "restored"}
    history = cells("gen = iter(base)\nkept = 'replayed'", "base.append(3)\nnext(gen)")
    outcome = run_recipe(plan(["gen"], history), namespace, exec_cell)
    assert outcome == {"gen": "replayed"}
    assert namespace["base"] == [1, 2] and namespace["kept"] == "restored"  # the replayed cells saw copies
    assert list(namespace["gen"]) == [2, 3]  # the generator as the cells left it (on the scratch copy)


def test_a_cell_that_fails_when_run_again_takes_nothing() -> None:
    namespace: dict[str, Any] = {}
    outcome = run_recipe(plan(["h"], cells("h = open('/nonexistent/x')")), namespace, exec_cell)
    assert "h" not in namespace and outcome["h"].startswith("not replayed: cell [1] failed when run again")


@pytest.mark.parametrize("mode", ["ask", "auto", "never"])
def test_restore_offers_runs_or_only_names_the_replay(mode: str, store: Any) -> None:
    import types

    from jupyter_ckpt.checkpointer import Checkpointer

    module = types.ModuleType("__main__")
    ckpt = Checkpointer(store, "gen.ipynb", module)
    source = "gen = (i * i for i in range(5))\nfirst = next(gen)"
    exec(source, module.__dict__)
    ckpt.record_cell(1, source, True, 0.0)
    cid = ckpt.save()
    fresh = types.ModuleType("__main__")
    other = Checkpointer(store, "gen.ipynb", fresh, replay_mode=mode)
    report = other.restore(cid)
    summary = report.summary()
    if mode == "auto":
        assert next(fresh.__dict__["gen"]) == 1 and "rebuilt by running its cells again: gen" in summary
    elif mode == "ask":
        assert "gen" not in fresh.__dict__ and "%checkpoint replay would rebuild gen (cells [1])" in summary
        assert other.replay() == {"gen": "replayed"} and next(fresh.__dict__["gen"]) == 1
    else:
        assert "gen" not in fresh.__dict__ and "replay" not in summary
    assert fresh.__dict__["first"] == 0  # the restored value, not the replayed cell's

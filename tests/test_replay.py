"""Replay: which cells rebuild a variable a checkpoint could not hold, and running them without harm."""

from __future__ import annotations

import re
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


def test_each_recipe_runs_on_its_own_and_one_that_fails_stops_no_other() -> None:
    namespace: dict[str, Any] = {}
    history = cells(
        "a = iter([1, 2])",
        "b = iter(open('/nonexistent/data.csv'))",
        "c = iter('xy')",
        "next(c)",
    )
    recipe = plan(["a", "b", "c"], history)
    assert [part.names for part in recipe.parts] == [["a"], ["b"], ["c"]]
    assert [c["count"] for c in recipe.cells] == [1, 2, 3, 4] and recipe.runnable == ["a", "b", "c"]
    outcome = run_recipe(recipe, namespace, exec_cell)
    assert outcome["a"] == outcome["c"] == "replayed" and list(namespace["a"]) == [1, 2] and next(namespace["c"]) == "y"
    assert outcome["b"].startswith("not replayed: cell [2] failed when run again: FileNotFoundError")
    assert "b" not in namespace


def test_a_variable_rebuilt_from_a_file_that_changed_since_its_cells_ran_says_so(tmp_path: Any) -> None:
    """Run again, a cell reads what a file holds now: the variable it rebuilds may not be the checkpoint's. A file
    the variable's own later cells wrote (a database they inserted into) is theirs, and not said."""
    import os

    data, kept, book = tmp_path / "rows.csv", tmp_path / "kept.txt", tmp_path / "book.txt"
    data.write_text("a\n1\n2\n")
    kept.write_text("x\n")
    book.write_text("b\n")
    history = cells(
        "rows = iter(Path(path).read_text().splitlines(True))",
        f"other = iter(Path({str(kept)!r}).read_text().splitlines(True))",
        "lines = iter(Path(path).read_text().splitlines(True))\nnext(lines)",
        f"notes = [Path({str(book)!r}).read_text()]",
        f"Path({str(book)!r}).write_text('c')\nnotes.append(1)",
    )
    for cell in history:
        cell["time"] = 1_000.0 + cell["count"]  # type: ignore[typeddict-unknown-key]
    os.utime(kept, (1_000.5, 1_000.5))  # written before its cell ran
    os.utime(data, (1_001.5, 1_001.5))  # after the first cell ran, before the third
    os.utime(book, (1_004.5, 1_004.5))  # by the fifth cell, after the fourth read it
    namespace: dict[str, Any] = {"path": data, "Path": type(data)}
    outcome = run_recipe(plan(["rows", "other", "lines", "notes"], history), namespace, exec_cell)
    assert outcome["rows"] == (
        f"replayed; cell [1] read {data}, which changed since it ran: the value may not be the checkpoint's"
    )
    assert outcome["other"] == outcome["lines"] == outcome["notes"] == "replayed"
    assert next(namespace["rows"]) == "a\n" and next(namespace["lines"]) == "1\n"  # rebuilt all the same


def test_a_recipe_that_uses_another_missing_variable_runs_that_ones_cells_first() -> None:
    history = cells(
        "import sqlite3\nconn = sqlite3.connect(':memory:')",
        "conn.execute('create table t (x)')",
        "cur = conn.execute('select 1')",
        "conn.execute('insert into t values (1)')",
        "gen = iter(range(3))",
    )
    recipe = plan(["cur"], history)  # the cursor alone is missing: the restore brought the connection back
    assert [c["count"] for c in recipe.cells] == [3]
    recipe = plan(["cur", "conn", "gen"], history)
    assert [part.names for part in recipe.parts] == [["conn", "cur"], ["gen"]]
    namespace: dict[str, Any] = {}
    assert run_recipe(recipe, namespace, exec_cell) == dict.fromkeys(["conn", "cur", "gen"], "replayed")
    assert namespace["cur"].fetchone() == (1,) and namespace["conn"].execute("select * from t").fetchall() == [(1,)]
    namespace["conn"].close()
    # The cursor was made from the connection as it was then: the binding before it, not the one after.
    history = cells("conn = iter(['old'])", "cur = map(str.upper, conn)", "conn = iter(['new'])")
    recipe = plan(["conn", "cur"], history)
    assert [part.names for part in recipe.parts] == [["cur"], ["conn"]]
    assert [[c["count"] for c in part.cells] for part in recipe.parts] == [[1, 2], [3]]
    namespace = {}
    assert run_recipe(recipe, namespace, exec_cell) == {"conn": "replayed", "cur": "replayed"}
    assert list(namespace["cur"]) == ["OLD"] and list(namespace["conn"]) == ["new"]
    # A cell that makes the connection before it uses it needs no earlier one: the cell run before is not run.
    history = cells("conn = connect()", "conn = connect()\ncur = conn.cursor()")
    assert (
        "conn" not in cell_names(history[1]["source"]).needs and "conn" in cell_names("conn.close()\nconn = c()").needs
    )
    assert [c["count"] for c in plan(["conn", "cur"], history).cells] == [2]
    # A connection whose cell failed cannot be remade: neither can the cursor made from it.
    failed = plan(["conn", "cur"], cells("conn = connect()", "conn.execute('x')", "cur = conn.cursor()", failed=(2,)))
    assert failed.runnable == [] and "cell [2] that it needs failed" in failed.problems["cur"]


def test_a_cell_that_reaches_a_variable_through_a_notebook_function_is_in_its_recipe() -> None:
    """``next_batch()`` advances the generator the function reads: replay left such cells out and said
    "replayed" of a generator back at its start, a hash of fewer bytes, a table with no rows."""
    history = cells(
        "import hashlib, sqlite3\ndef batches(n):\n    for i in range(n):\n        yield i\ngen = batches(10)",
        "h = hashlib.sha256(b'abc')\ncon = sqlite3.connect(':memory:')\ncon.execute('create table t (v)')",
        "def next_batch():\n    return next(gen)\ndef add(v):\n    con.execute('insert into t values (?)', (v,))",
        "def feed(b):\n    h.update(b)\ndef step(v):\n    add(v)\n    return next_batch()",
        "next_batch(); feed(b'zz')",
        "for v in range(5):\n    step(v)",
        "def next_batch():\n    return 'no longer the generator'\nnext_batch()",
    )
    recipe = plan(["gen", "h", "con"], history)
    assert [c["count"] for c in recipe.cells] == [1, 2, 3, 4, 5, 6]  # not [7]: that next_batch reads no gen
    namespace: dict[str, Any] = {}
    assert run_recipe(recipe, namespace, exec_cell) == dict.fromkeys(["con", "gen", "h"], "replayed")
    assert next(namespace["gen"]) == 6 and namespace["h"].digest() == __import__("hashlib").sha256(b"abczz").digest()
    assert namespace["con"].execute("select count(*) from t").fetchone() == (5,)
    namespace["con"].close()
    # A function made before the variable it reaches is made again with the cells: the restored one looks its
    # globals up in the kernel's namespace, which has no such variable. What it changes of a restored variable
    # is changed on a copy, as a cell's own change is.
    history = cells("rows = []\ndef add():\n    rows.append(next(gen))", "gen = iter(range(3))", "add()")
    assert [c["count"] for c in plan(["gen"], history).cells] == [1, 2, 3]
    restored = [0]
    namespace = {"rows": restored}
    exec(history[0]["source"].replace("rows = []", ""), namespace)  # the restored function
    assert run_recipe(plan(["gen"], history), namespace, exec_cell) == {"gen": "replayed"}
    assert restored == [0] and namespace["rows"] is restored and next(namespace["gen"]) == 1


def test_recipes_that_share_a_cell_run_it_once_and_a_later_failure_stops_only_its_own() -> None:
    namespace: dict[str, Any] = {"runs": []}
    history = cells(
        "import itertools\nruns.append(1)\nleft, right = itertools.tee(iter(range(4)))",
        "next(left)",
        "right.send(None)",  # a tee iterator has no send: this cell fails when run again
    )
    recipe = plan(["left", "right"], history)
    assert [part.names for part in recipe.parts] == [["left", "right"]]
    outcome = run_recipe(recipe, namespace, exec_cell)
    assert outcome["left"] == "replayed" and list(namespace["left"]) == [1, 2, 3]
    assert outcome["right"].startswith("not replayed: cell [3] failed when run again: AttributeError")
    assert namespace["runs"] == []  # the restored list: the part ran on a copy of it


def test_an_object_that_cannot_be_copied_stops_only_the_recipes_that_change_it(tmp_path: Any) -> None:
    log = (tmp_path / "run.log").open("w")
    log.write("start\n")
    log.flush()
    namespace: dict[str, Any] = {"log": log, "feed": (i for i in range(3)), "rows": [1]}
    history = cells(
        "gen = iter(rows)\nfeed.send(None)",  # a generator the kernel kept: no copy of it can be made
        "count = iter(range(2))\nlog.write('counted\\n')",  # an open file: written through the kernel's handle
        "more = iter(rows)\nrows.append(2)",
    )
    outcome = run_recipe(plan(["gen", "count", "more"], history), namespace, exec_cell)
    assert outcome["gen"].startswith("not replayed: cell [1] changes feed, which cannot be copied (TypeError")
    assert outcome["count"] == outcome["more"] == "replayed" and list(namespace["more"]) == [1, 2]
    assert namespace["rows"] == [1] and next(namespace["feed"]) == 0  # the kernel's own, unchanged
    assert namespace["log"] is log and not log.closed
    log.write("after\n")
    log.close()
    assert (tmp_path / "run.log").read_text() == "start\ncounted\nafter\n"  # one handle: nothing written over


def test_replay_in_a_real_kernel_rebuilds_what_it_can_and_says_why_not_for_the_rest(
    kernels: Any, tmp_path: Any
) -> None:
    """Issue #31: a connection, a generator and a log file opened for writing, as a notebook holds them."""
    db, log, src = tmp_path / "db.sqlite", tmp_path / "run.log", tmp_path / "source.txt"
    src.write_text("a\nb\n")
    k = kernels("issue31.ipynb")
    k.ok("%load_ext jupyter_ckpt")
    k.ok(f"import sqlite3\nconn = sqlite3.connect({str(db)!r})\nconn.execute('create table if not exists t (x)')")
    k.ok("squares = (i * i for i in range(10))\nfirst = next(squares)")
    k.ok(f"log = open({str(log)!r}, 'w')\nlog.write('start\\n')")
    k.ok("conn.execute('insert into t values (?)', (first,))\nconn.commit()\nlog.write('inserted\\n')\nlog.flush()")
    k.ok(f"lines = (line.strip() for line in open({str(src)!r}))")
    k.ok("%checkpoint save -t issue")
    k.kill()
    src.unlink()  # the file a generator read is gone: its cell cannot run again

    asked = kernels("issue31.ipynb")
    asked.ok("%load_ext jupyter_ckpt")
    out = asked.ok("%checkpoint restore latest")
    assert "%checkpoint replay would rebuild conn, lines, squares (cells [2], [3], [5], [6])" in out
    out = asked.ok("%checkpoint replay")
    assert "conn: replayed\n" in out and "squares: replayed\n" in out  # its database written by its own cells
    assert "lines: not replayed: cell [6] failed when run again: FileNotFoundError" in out
    assert asked.value("(next(squares), conn.execute('select count(*) from t').fetchone()[0])") == (1, 2)
    assert asked.value("'lines' in dir()") is False
    asked.ok("log.write('after\\n')\nlog.flush()")
    assert log.read_text() == "start\ninserted\ninserted\nafter\n"  # replay wrote it once more: a side effect
    asked.close()

    auto = kernels("issue31.ipynb")
    auto.ok("%load_ext jupyter_ckpt")
    out = auto.ok("%checkpoint restore issue --replay")
    assert "rebuilt by running its cells again: conn" in out and "rebuilt by running its cells again: squares" in out
    assert re.search(
        r"not restored: lines \(generator could not be serialized: .*; absent; not replayed: "
        r"cell \[6\] failed when run again: FileNotFoundError",
        out,
    ), out
    assert auto.value("next(squares)") == 1 and auto.value("conn.execute('select count(*) from t').fetchone()") == (3,)


def test_replay_in_a_real_kernel_runs_each_cell_on_the_values_it_read_then(kernels: Any) -> None:
    """A notebook that reuses its names: ``n`` and ``total`` were bound again after the cells that made the
    generator and the rows read them."""
    k = kernels("reused.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto off")
    k.ok("n = 3")
    k.ok("evens = (i * 2 for i in range(n))\nnext(evens)")
    k.ok("n = 10")
    k.ok("import sqlite3\ndb = sqlite3.connect(':memory:')\ndb.execute('create table t (v)')")
    k.ok("total = 5")
    k.ok("db.execute('insert into t values (?)', (total,))\ntotal += 1")
    k.ok("%checkpoint save")
    k.close()
    fresh = kernels("reused.ipynb")
    fresh.ok("%load_ext jupyter_ckpt")
    out = fresh.ok("%checkpoint restore latest --replay")
    assert "rebuilt by running its cells again: evens" in out and "rebuilt by running its cells again: db" in out
    assert fresh.value("(list(evens), db.execute('select v from t').fetchall(), n, total)") == ([2, 4], [(5,)], 10, 6)


def test_variables_that_could_not_be_loaded_are_offered_to_replay(kernels: Any) -> None:
    """``Unit.__reduce__`` calls a notebook function that builds a ``Unit``: loading the instance calls it before
    its group has bound ``Unit`` in the namespace (dill fails the same way). Both are left out, named, and
    their cells offered."""
    k = kernels("factory.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto off")
    k.ok("def make(v):\n    return Unit(v)")
    k.ok(
        "class Unit:\n    def __init__(self, v):\n        self.v = v\n    def __reduce__(self):\n"
        "        return (make, (self.v,))"
    )
    k.ok("u = Unit(4)\nkept = 1")
    k.ok("%checkpoint save")
    k.close()
    fresh = kernels("factory.ipynb")
    fresh.ok("%load_ext jupyter_ckpt")
    out = fresh.ok("%checkpoint restore latest")
    assert "not restored: u (could not be loaded (NameError" in out and "%checkpoint replay" in out
    fresh.ok("%checkpoint replay")
    assert fresh.value("(type(u) is Unit, u.v, kept)") == (True, 4, 1)


@pytest.mark.parametrize("how", ["--replay", "then %checkpoint replay"])
def test_a_replayed_cell_that_seeds_or_sets_an_option_leaves_the_restored_streams_and_settings(
    kernels: Any, how: str
) -> None:
    """The cell that made the generator also seeded the streams and set an option; the restore set them as the
    checkpoint kept them, and replaying that cell for the generator must not set them back."""
    k = kernels("seeded.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto off")
    k.ok(
        "import random\nimport numpy as np\nimport pandas as pd\nrandom.seed(1)\nnp.random.seed(1)\n"
        "pd.set_option('display.max_rows', 7)\nsquares = (i * i for i in range(4))"
    )
    k.ok(
        "random.seed(11)\nnp.random.seed(11)\npd.set_option('display.max_rows', 12)\n"
        "expected = (random.random(), np.random.rand())\nrandom.seed(11)\nnp.random.seed(11)"
    )
    k.ok("%checkpoint save")
    k.close()
    fresh = kernels("seeded.ipynb")
    fresh.ok("%load_ext jupyter_ckpt")
    if how == "--replay":
        out = fresh.ok("%checkpoint restore latest --replay")
    else:
        fresh.ok("%checkpoint restore latest")
        out = fresh.ok("%checkpoint replay")
    assert "squares" in out
    assert fresh.value("((random.random(), np.random.rand()) == expected, list(squares))") == (True, [0, 1, 4, 9])
    assert fresh.value("pd.get_option('display.max_rows')") == 12


def test_a_module_made_in_a_cell_is_skipped_and_rebuilt_by_replay_not_imported_by_its_name(
    kernels: Any, tmp_path: Any
) -> None:
    """``types.ModuleType`` and a file loaded with ``module_from_spec`` off the import path: no import gives them,
    so a restore used to name them "import ... failed" and offer nothing. One on the path is imported again."""
    off_path, on_path = tmp_path / "lib", tmp_path / "work"
    off_path.mkdir()
    on_path.mkdir()
    (off_path / "helpers.py").write_text("def triple(x):\n    return 3 * x\n")
    (on_path / "local_tools.py").write_text("NAME = 'tools'\n")
    load = (
        "import importlib.util\ndef load(name, path):\n    spec = importlib.util.spec_from_file_location(name, path)\n"
    )
    load += "    module = importlib.util.module_from_spec(spec)\n    spec.loader.exec_module(module)\n    return module"
    k = kernels("modules.ipynb", cwd=str(on_path))
    k.ok("%load_ext jupyter_ckpt")
    k.ok(load)
    k.ok("import types\ncfg = types.ModuleType('cfg')\ncfg.lr = 0.1")
    k.ok(f"helpers = load('helpers', {str(off_path / 'helpers.py')!r})")
    k.ok("tools = load('local_tools', 'local_tools.py')\nimport numpy as np")
    status = k.ok("%checkpoint save -t made\n%checkpoint status")
    assert "skipped: cfg: " in status and "was made in the notebook" in status and "skipped: helpers: " in status
    k.close()

    fresh = kernels("modules.ipynb", cwd=str(on_path))
    fresh.ok("%load_ext jupyter_ckpt")
    out = fresh.ok("%checkpoint restore made")
    assert "%checkpoint replay would rebuild cfg, helpers" in out, out
    assert "not restored: cfg.lr" not in out  # an attribute of the module, made again with it, not a loss of its own
    assert "not restored: tools" not in out and fresh.value("(tools.NAME, np.__name__)") == ("tools", "numpy")
    out = fresh.ok("%checkpoint replay")
    assert "cfg: replayed\n" in out and "helpers: replayed\n" in out
    assert fresh.value("(cfg.lr, helpers.triple(2))") == (0.1, 6)


def test_a_restored_variable_bound_again_after_a_cell_read_it_is_rebuilt_as_that_cell_read_it() -> None:
    """The restore holds ``n`` and ``total`` as the last cells left them; the replayed cells read them as they were."""
    history = cells(
        "n = 3",
        "gen = (i * 2 for i in range(n))\nnext(gen)",
        "n = 10",
        "log = []\ntotal = 5",
        "log.append(total)\nsink = iter(log)\ntotal += 1",
        "pair = (n, gen)",  # reads n as the restore holds it, and gen as its own recipe left it
    )
    namespace: dict[str, Any] = {"n": 10, "total": 6, "log": [5]}
    recipe = plan(["gen", "sink", "pair"], history)
    assert [[c["count"] for c in part.cells] for part in recipe.parts] == [[1, 2, 6], [4, 5]]
    assert run_recipe(recipe, namespace, exec_cell) == dict.fromkeys(["gen", "pair", "sink"], "replayed")
    assert list(namespace["sink"]) == [5] and namespace["pair"][0] == 10 and namespace["pair"][1] is namespace["gen"]
    assert list(namespace["gen"]) == [2, 4]  # range(3), not range(10)
    assert (namespace["n"], namespace["total"], namespace["log"]) == (10, 6, [5])  # the restored values stand
    # What the generator looks up as it runs is what the kernel held when the restore was made: the new `step`.
    history = cells(
        "def step(x):\n    return x + 1", "lazy = (step(i) for i in range(2))", "def step(x):\n    return x * 100"
    )
    namespace = {}
    exec_cell(history[2]["source"], namespace)
    assert run_recipe(plan(["lazy"], history), namespace, exec_cell) == {"lazy": "replayed"}
    assert list(namespace["lazy"]) == [0, 100]
    # A builtin the cell called, shadowed by a later cell: the cell calls the builtin again.
    history = cells("digits = (d for d in list(map(str, range(3))))", "str = 'shadow'")
    namespace = {"str": "shadow"}
    assert run_recipe(plan(["digits"], history), namespace, exec_cell) == {"digits": "replayed"}
    assert list(namespace["digits"]) == ["0", "1", "2"] and namespace["str"] == "shadow"


def test_a_widget_made_from_a_function_is_replayed_and_the_others_come_back_with_their_values(kernels: Any) -> None:
    """A widget is made again from its traits; ``interactive`` also needs the function it was made from, which no
    trait holds: it is skipped with that reason, and its cell rebuilds it."""
    k = kernels("widgets.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto off")
    k.ok("import ipywidgets as w\nlimit = w.IntSlider(value=4, max=9)")
    k.ok("def double(x=1):\n    return 2 * x\npanel = w.interactive(double, x=(0, 9))")
    status = k.ok("%checkpoint save -t w\n%checkpoint status")
    assert "skipped: panel: " in status and "made from arguments its traits do not keep" in status, status
    k.close()

    fresh = kernels("widgets.ipynb")
    fresh.ok("%load_ext jupyter_ckpt")
    out = fresh.ok("%checkpoint restore w --replay")
    assert "rebuilt by running its cells again: panel" in out and "not restored: limit" not in out, out
    assert fresh.value("(limit.value, limit.max, panel.result, panel.children[0].value)") == (4, 9, 2, 1)


def test_what_was_made_after_a_missing_variable_from_its_objects_is_replayed_with_it_but_never_blocks_it() -> None:
    """``opt`` was made from ``params``, made from ``net``, in a cell that does not name ``net``; ``data`` was
    there before ``net`` took it. ``net`` is rebuilt with the cells of ``params`` and ``opt`` (the one that
    steps the model runs on the optimizer made again), not with those of ``data``; and where a cell of ``opt``
    failed, ``net`` is still rebuilt, without it."""
    history = cells("data = load()", "net = Net(data)", "params = net.parameters()", "opt = SGD(params)", "opt.step()")
    shared = {"params": {"net"}, "opt": {"net"}, "data": {"net"}}
    recipe = plan(["net"], history, shared)
    assert [c["count"] for c in recipe.cells] == [2, 3, 4, 5] and recipe.runnable == ["net"]
    assert [part.names for part in recipe.parts] == [["net"]]
    failed = plan(["net"], cells(*[c["source"] for c in history], failed=(4,)), shared)
    assert [c["count"] for c in failed.cells] == [2, 3] and failed.runnable == ["net"]

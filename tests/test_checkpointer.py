"""The front door in-process, on a module that stands in for a kernel's namespace."""

from __future__ import annotations

import gc
import importlib
import io
import json
import logging
import os
import random
import re
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import types
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from jupyter_ckpt import checkpointer
from jupyter_ckpt.capture import group
from jupyter_ckpt.checkpointer import Checkpointer
from jupyter_ckpt.errors import BadArgument, IntegrityError, UnknownCheckpoint
from jupyter_ckpt.restore import restore_namespace
from jupyter_ckpt.schedule import Scheduler
from jupyter_ckpt.store import Store, load_secret
from jupyter_ckpt.timeline import Timeline
from jupyter_ckpt.units import parse_size

NOTEBOOK = """
import numpy as np
import random
from collections import OrderedDict as OD
base = np.arange(100_000, dtype=float)
view = base[10:20]
shared = [1, 2]
holder = {"shared": shared}
alias = holder
cycle = []
cycle.append(cycle)
scale = 3
def scaled(x):
    return x * scale
def make_counter():
    n = [0]
    def bump():
        n[0] += 1
        return n[0]
    return bump
counter = make_counter()
square = lambda v: v * v
class Point:
    def __init__(self, x):
        self.x = x
    def norm(self):
        return abs(self.x) * scale
p = Point(-2)
od = OD(a=1)
"""


@pytest.fixture
def nb(store: Store) -> tuple[types.ModuleType, Checkpointer]:
    module = types.ModuleType("__main__")
    exec(textwrap.dedent(NOTEBOOK), module.__dict__)
    return module, Checkpointer(store, "nb.ipynb", module)


def test_identity_closures_classes_and_random_streams_survive(nb: tuple[types.ModuleType, Checkpointer]) -> None:
    module, ckpt = nb
    ns = module.__dict__
    cid = ckpt.save()
    expected = (random.random(), np.random.rand())
    counter_before = ns["counter"]()
    exec("del base, view, shared, holder, alias, cycle, scaled, counter, square, Point, p, od, np", ns)
    ns["scale"] = 100

    report = ckpt.restore(cid)
    assert report.removed == []
    assert (random.random(), np.random.rand()) == expected
    assert ns["holder"]["shared"] is ns["shared"] and ns["alias"] is ns["holder"]
    assert ns["cycle"][0] is ns["cycle"]
    assert np.shares_memory(ns["view"], ns["base"])
    ns["base"][10] = -1.0
    assert ns["view"][0] == -1.0  # still a view, not a copy
    assert ns["scale"] == 3
    assert ns["scaled"](2) == 6  # a restored function sees the restored globals
    ns["scale"] = 5
    assert ns["scaled"](2) == 10  # ... and the live ones after that
    assert ns["counter"]() == counter_before  # the closure's cell held 1 at checkpoint time, so bump gives 1 again
    assert ns["square"](4) == 16
    assert isinstance(ns["p"], ns["Point"]) and ns["p"].norm() == 10
    assert ns["np"] is np and list(ns["od"]) == ["a"]


def test_groups_follow_shared_objects_only(nb: tuple[types.ModuleType, Checkpointer]) -> None:
    module, _ = nb
    variables = {k: v for k, v in module.__dict__.items() if not k.startswith("__") and not isinstance(v, type(np))}
    groups = {tuple(g) for g in group(variables)}
    assert ("alias", "holder", "shared") in groups
    assert ("base", "view") in groups
    assert ("Point", "p") in groups
    assert ("scale",) in groups
    # Sharing found deep inside, through an object another variable reached first, and chains of it.
    rows = [{"id": i, "tags": [str(i)]} for i in range(1000)]
    tag = rows[500]["tags"]
    chained = {"a": [rows[3]], "b": {"rows": rows[7:9]}, "c": ([tag],), "d": np.array([rows[1]], dtype=object)}
    alone = {"e": [{"id": 1, "tags": ["1"]}], "f": (1, "x", 2.0, True), "g": np.arange(3)}
    assert sorted(group({**chained, **alone, "rows": rows})) == [["a", "b", "c", "d", "rows"], ["e"], ["f"], ["g"]]


def test_a_loop_variable_moving_along_a_list_does_not_rewrite_the_list(store: Store) -> None:
    module = types.ModuleType("__main__")
    users = [{"id": i, "name": f"user{i:06d}", "tags": ["new"]} for i in range(200_000)]
    module.__dict__.update(users=users, u=users[5])  # one group: u is one of the list's dicts
    ckpt = Checkpointer(store, "loop.ipynb", module)
    first = ckpt.save()
    module.__dict__["u"] = users[199_999]  # what `for u in users: ...` leaves behind
    second = ckpt.save()
    assert store.get(second).new_bytes < store.get(first).new_bytes / 50
    fresh = types.ModuleType("__main__")
    Checkpointer(store, "loop.ipynb", fresh).restore(second)
    assert fresh.__dict__["users"] == users and fresh.__dict__["u"] is fresh.__dict__["users"][199_999]


def test_the_timeline_shows_large_dict_subclasses_abbreviated(store: Store) -> None:
    from collections import Counter, defaultdict

    module = types.ModuleType("__main__")
    module.__dict__["followers"] = defaultdict(list, {i: [i] for i in range(300_000)})
    module.__dict__["counts"] = Counter({"b": 2, "a": 1})
    cid = Checkpointer(store, "dicts.ipynb", module).save()
    variables = store.manifest(cid)["variables"]
    # reprlib's short form, complete, not the first 200 characters of a 300,000-entry repr.
    assert variables["followers"]["repr"] == "defaultdict({0: [0], 1: [1], 2: [2], 3: [3], ...})"
    assert variables["counts"]["repr"] == "Counter({'a': 1, 'b': 2})"


def test_restore_is_exact_and_reads_only_what_changed(nb: tuple[types.ModuleType, Checkpointer]) -> None:
    module, ckpt = nb
    ns = module.__dict__
    ckpt.record_cell(1, "setup", True, 0.1)
    first = ckpt.save()
    ckpt.record_cell(2, "later = 1; shared.append(3)", True, 0.1)
    exec("later = 1; shared.append(3)", ns)
    second = ckpt.save(trigger="cell", cell=2)
    assert ckpt.diff(first, second).as_dict()["added"].keys() == {"later"}
    assert set(ckpt.diff(first, second).changed) == {"shared", "holder", "alias"}

    report = ckpt.undo()
    assert report.checkpoint == first
    assert "later" not in ns and ns["shared"] == [1, 2]
    assert sorted(report.loaded) == ["alias", "holder", "shared"]
    assert "base" in report.kept  # the 800 kB array was not read again
    assert [c["source"] for c in ckpt.history()] == ["setup"]  # the branch starts before the undone cell


def test_branching_keeps_both_futures(nb: tuple[types.ModuleType, Checkpointer]) -> None:
    module, ckpt = nb
    ns = module.__dict__
    root = ckpt.save(tag="root")
    ns["route"] = "a"
    a = ckpt.save()
    ckpt.restore("root")
    ns["route"] = "b"
    b = ckpt.save()
    records = {r.id: r for r in ckpt.checkpoints()}
    assert records[a].parent == root
    restore_entry = records[b].parent
    assert records[restore_entry].trigger == "restore" and records[restore_entry].parent == root
    ckpt.restore(a)
    assert ns["route"] == "a"
    ckpt.restore(b)
    assert ns["route"] == "b"


def test_a_head_deleted_by_the_server_leaves_the_timeline_and_undo_working(
    nb: tuple[types.ModuleType, Checkpointer], store: Store, jupyter_dirs: Path
) -> None:
    module, ckpt = nb
    ns = module.__dict__
    first = ckpt.save()
    ns["scale"] = 4
    second = ckpt.save()
    server = Store(store.root, load_secret(jupyter_dirs / "data" / "ckpt" / "secret"))
    server.delete([second])  # what DELETE /api/ckpt/checkpoints/<id> does, from the server's process
    ns["scale"] = 5
    third = ckpt.save()
    records = {r.id: r for r in ckpt.checkpoints()}
    assert second not in records
    assert records[third].parent == first
    assert records[third].changed == ["scale"]  # against the first checkpoint, where scale was 3
    assert ckpt.diff().changed == {}
    ckpt.undo()
    assert ns["scale"] == 3


def test_unserializable_variables_are_skipped_reported_once_and_kept(store: Store) -> None:
    module = types.ModuleType("__main__")
    messages: list[str] = []
    ckpt = Checkpointer(store, "nb.ipynb", module, notify=messages.append)
    exec("import sqlite3, threading\ngen = (i for i in range(3))\nconn = sqlite3.connect(':memory:')\n"
         "lock = threading.Lock()\nx = [1]\nmixed = [gen, x]", module.__dict__)  # fmt: skip
    cid = ckpt.save()
    ckpt.save()
    assert len(messages) == 1
    assert "gen (generator" in messages[0] and "conn (Connection" in messages[0]
    manifest = store.manifest(cid)
    assert set(manifest["skipped"]) == {"gen", "conn", "mixed"}
    assert "x" in manifest["variables"] and "lock" in manifest["variables"]  # dill restores locks
    module.__dict__["x"] = None
    report = ckpt.restore(cid)
    assert module.__dict__["x"] == [1]
    assert "gen" in report.not_restored and "kept its current value" in report.not_restored["gen"]


def test_a_tampered_blob_changes_nothing(nb: tuple[types.ModuleType, Checkpointer], store: Store) -> None:
    module, ckpt = nb
    cid = ckpt.save()
    module.__dict__["scale"] = 42
    key = store.manifest(cid)["groups"][0]["key"]
    path = store.root / "blobs" / key[:2] / key
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    before = dict(module.__dict__)
    ckpt._held = None  # no variable is compared with the checkpoint: every group is read
    with pytest.raises(IntegrityError, match="signature"):
        ckpt.restore(cid)
    assert module.__dict__ == before


def test_the_working_directory_and_import_path_come_back_and_a_refused_restore_moves_neither(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "data").mkdir()
    monkeypatch.chdir(project)
    monkeypatch.setattr(sys, "path", list(sys.path))  # this test's own, put back after it
    module = types.ModuleType("__main__")
    module.__dict__["rows"] = [1]
    ckpt = Checkpointer(store, "paths.ipynb", module)
    sys.path.append("src")
    os.chdir("data")
    cid = ckpt.save()
    assert store.manifest(cid)["paths"] == {"cwd": "data", "sys_path_front": [], "sys_path_end": ["src"]}
    sys.path.remove("src")
    os.chdir(project)

    key = store.manifest(cid)["groups"][0]["key"]
    blob = store.root / "blobs" / key[:2] / key
    good = blob.read_bytes()
    blob.write_bytes(good[:-1] + bytes([good[-1] ^ 0xFF]))
    ckpt._held = None  # every group is read
    with pytest.raises(IntegrityError, match="signature"):
        ckpt.restore(cid)
    assert os.getcwd() == str(project) and "src" not in sys.path

    blob.write_bytes(good)
    ckpt.restore(cid)
    assert os.getcwd() == str(project / "data") and sys.path[-1] == "src"

    os.chdir(project)
    (project / "data").rmdir()
    module.__dict__["rows"] = None
    report = ckpt.restore(cid)
    assert report.not_restored == {
        "working directory": f"{project / 'data'}: No such file or directory; it stays {project}"
    }
    assert module.__dict__["rows"] == [1] and os.getcwd() == str(project)


def test_a_variable_holding_the_namespace_comes_back_as_the_namespace_and_shares_a_group_with_nothing(
    store: Store,
) -> None:
    module = types.ModuleType("__main__")
    exec("rows = {i: [i, str(i)] for i in range(1000)}\ng = globals()", module.__dict__)
    cid = Checkpointer(store, "globals.ipynb", module).save()
    # Not one group with everything it holds, pickled again whenever anything changes: a reference.
    groups = {tuple(g["names"]): g["serializer"] for g in store.manifest(cid)["groups"]}
    assert groups == {("g",): "dill", ("rows",): "pickle"}
    fresh = types.ModuleType("__main__")
    assert Checkpointer(store, "globals.ipynb", fresh).restore(cid).not_restored == {}
    assert fresh.__dict__["g"] is fresh.__dict__ and fresh.__dict__["rows"][7] == [7, "7"]


@pytest.fixture
def environment_put_back() -> Iterator[None]:
    """The test changes the process's environment variables: as they were again after it."""
    before = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(before)


def test_environment_variables_come_back_before_the_imports_and_an_undo_takes_back_those_set_after(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, environment_put_back: None
) -> None:
    os.environ.update(EV_CHANGED="start", EV_GONE="here")
    _importable(tmp_path, monkeypatch, "envlib", "import os\nMODE = os.environ.get('EV_MODE', 'unset')\n")
    module = types.ModuleType("__main__")
    module.__dict__["rows"] = [1]
    ckpt = Checkpointer(store, "environ.ipynb", module)
    first = ckpt.save()
    os.environ.update(EV_MODE="fast", EV_CHANGED="later", TOKENIZERS_PARALLELISM="false")  # %env EV_MODE=fast
    del os.environ["EV_GONE"]
    os.environ.update(SERVICE_API_KEY="sk-live-123", EV_DB="postgres://me:pw-456@db/x")  # load_dotenv()
    exec("import envlib", module.__dict__)
    cid = ckpt.save()
    assert store.manifest(cid)["environment"] == {
        "set": {"EV_CHANGED": "later", "EV_MODE": "fast", "TOKENIZERS_PARALLELISM": "false"},
        "withheld": ["EV_DB", "SERVICE_API_KEY"],
        "unset": ["EV_GONE"],
    }
    stored = b"".join(path.read_bytes() for path in store.root.rglob("*") if path.is_file())
    assert b"sk-live-123" not in stored and b"pw-456" not in stored  # the credentials are nowhere in the store
    os.environ["EV_ONLY"] = "1"  # a cell that only sets a variable: a new state
    only = ckpt.save()
    assert [r.changed for r in ckpt.checkpoints() if r.id in (cid, only)] == [["envlib"], ["os.environ"]]

    assert ckpt.restore(first).not_restored == {}  # the undo
    assert {k: os.environ.get(k) for k in ("EV_MODE", "EV_CHANGED", "EV_GONE", "EV_ONLY")} == {
        "EV_MODE": None,
        "EV_CHANGED": "start",
        "EV_GONE": "here",
        "EV_ONLY": None,
    }

    # As in a new kernel, started with an environment of its own: the kept changes are set before the module
    # that reads them is imported again, and its own start is kept where the session did not change it.
    del sys.modules["envlib"]
    os.environ.update(EV_CHANGED="new kernel", EV_OWN="mine")
    fresh = types.ModuleType("__main__")
    again = Checkpointer(store, "environ.ipynb", fresh)
    key = store.manifest(cid)["groups"][0]["key"]
    blob = store.root / "blobs" / key[:2] / key
    good = blob.read_bytes()
    blob.write_bytes(good[:-1] + bytes([good[-1] ^ 0xFF]))
    with pytest.raises(IntegrityError, match="signature"):
        again.restore(cid)
    assert "EV_MODE" not in os.environ and os.environ["EV_CHANGED"] == "new kernel"  # a refused restore set nothing
    blob.write_bytes(good)
    why = "not kept, as its value may be a credential: set it again"
    assert again.restore(cid).not_restored == {"os.environ['EV_DB']": why, "os.environ['SERVICE_API_KEY']": why}
    assert fresh.__dict__["envlib"].MODE == "fast"
    assert {k: os.environ.get(k) for k in ("EV_MODE", "EV_CHANGED", "EV_GONE", "EV_OWN")} == {
        "EV_MODE": "fast",
        "EV_CHANGED": "later",
        "EV_GONE": None,
        "EV_OWN": "mine",
    }


def test_bad_input_is_refused(nb: tuple[types.ModuleType, Checkpointer]) -> None:
    _, ckpt = nb
    with pytest.raises(UnknownCheckpoint):
        ckpt.restore("latest")
    ckpt.save(tag="t")
    with pytest.raises(BadArgument, match="already used"):
        ckpt.save(tag="t")
    with pytest.raises(BadArgument):
        ckpt.tag("latest", "12")
    with pytest.raises(BadArgument, match="no variable"):
        ckpt.restore("t", only=["nope"])
    with pytest.raises(BadArgument):
        ckpt.set_policy(every=0)
    with pytest.raises(BadArgument):
        ckpt.exclude(["not a name"])
    with pytest.raises(BadArgument):
        parse_size("lots")
    assert parse_size("2G") == 2 << 30 and parse_size("500MiB") == 500 << 20
    with pytest.raises(UnknownCheckpoint, match="no checkpoint or tag"):
        ckpt.restore("\u00b2")  # a digit to str.isdigit, not an id
    for tag in ("latest", "-2", "7", " padded", "", "\ud800", "t" * 101):
        with pytest.raises(BadArgument):
            ckpt.save(tag=tag)


def test_policy_every_and_interval(nb: tuple[types.ModuleType, Checkpointer]) -> None:
    _, ckpt = nb
    ckpt.set_policy(every=2)
    taken = [ckpt.after_cell(i, "pass", True, 0.0) for i in range(1, 5)]
    assert [t is not None for t in taken] == [False, True, False, True]
    ckpt.set_policy(every=None, interval=3600)
    assert ckpt.after_cell(5, "pass", True, 0.0) is None  # an hour has not passed since the last one
    ckpt._last_time -= 3601
    cid = ckpt.after_cell(6, "pass", True, 0.0)
    assert cid is not None and ckpt.resolve(cid).trigger == "interval"
    ckpt.set_policy(auto=False)
    assert ckpt.after_cell(7, "pass", True, 0.0) is None
    assert ckpt.store.policy("nb.ipynb")["auto"] is False  # remembered for the session
    # Keeping a variable out changes what is checkpointed, not when: every third cell stays every third cell.
    ckpt.set_policy(auto=True, every=3, interval=None)
    taken = [ckpt.after_cell(i, "pass", True, 0.0) for i in (8, 9)]
    ckpt.exclude(["scratch"])
    ckpt.include(["scratch"])
    taken.append(ckpt.after_cell(10, "pass", True, 0.0))
    assert [t is not None for t in taken] == [False, False, True]


def test_settle_makes_the_state_the_policy_has_not_taken_durable(nb: tuple[types.ModuleType, Checkpointer]) -> None:
    module, ckpt = nb
    ckpt.set_policy(every=5)
    assert ckpt.after_cell(1, "scale = 4", True, 0.0) is None  # the fifth cell is far off
    module.scale = 4
    ckpt.settle()
    (record,) = ckpt.checkpoints_committed()
    assert (record.trigger, record.cell) == ("cell", 1)
    assert ckpt.store.manifest(record.id)["variables"]["scale"]["repr"] == "4"  # the namespace as it was
    ckpt.settle()  # nothing ran since: nothing more to take
    ckpt.set_policy(auto=False)  # off: only what was asked for
    ckpt.after_cell(2, "scale = 5", True, 0.0)
    ckpt.settle()
    assert ckpt.checkpoints_committed() == [record]


def test_changing_a_few_rows_of_a_large_array_writes_one_chunk(store: Store) -> None:
    module = types.ModuleType("__main__")
    module.__dict__["table"] = np.random.default_rng(0).random((3_000, 1_000))  # 24 MB: six chunks
    ckpt = Checkpointer(store, "big.ipynb", module)
    first = ckpt.save()
    module.__dict__["table"][5, :] = -1.0
    second = ckpt.save()
    new = ckpt.store.get(second).new_bytes
    assert 4 << 20 <= new < 5 << 20  # one 4 MiB chunk and a small stream, not 24 MB
    table = module.__dict__["table"]
    report = ckpt.undo()
    assert report.patched == ["table"] and report.loaded == []  # one chunk copied back, nothing else read
    assert module.__dict__["table"] is table and table[5, 0] != -1.0
    assert np.array_equal(table, np.random.default_rng(0).random((3_000, 1_000)))
    ckpt.restore(first)
    ckpt.restore(second)
    assert (module.__dict__["table"][5, :] == -1.0).all()
    assert module.__dict__["table"].flags.writeable


def test_a_dataframe_with_dates_is_written_incrementally(store: Store) -> None:
    n = 2_000_000
    frame = pd.DataFrame(
        {
            "at": pd.Timestamp("2024-01-01") + pd.to_timedelta(np.arange(n), unit="s"),  # 16 MB of datetime64
            "took": pd.to_timedelta(np.arange(n) % 600, unit="s"),  # and of timedelta64
            "price": np.random.default_rng(0).random(n),
        }
    )
    module = types.ModuleType("__main__")
    module.__dict__["frame"] = frame
    ckpt = Checkpointer(store, "dates.ipynb", module)
    ckpt.save()
    frame.loc[7, "price"] = -1.0
    second = ckpt.save()
    assert store.get(second).new_bytes < 5 << 20  # the chunk that changed, not the dates again
    fresh = types.ModuleType("__main__")
    Checkpointer(store, "dates.ipynb", fresh).restore(second)
    pd.testing.assert_frame_equal(fresh.__dict__["frame"], frame)


def test_string_columns_are_stored_as_text_and_written_incrementally(store: Store) -> None:
    n = 2_000_000
    skus = np.array([f"SKU-{i:05d}" for i in range(5000)])
    frame = pd.DataFrame(
        {
            "product": pd.array(skus[np.arange(n) % 5000], dtype="string"),  # pandas' own string column
            "note": pd.Series([None if i % 9 == 0 else f"n{i}" for i in range(n)], dtype=object),  # with gaps
            "price": np.random.default_rng(0).random(n),
        }
    )
    labels = np.array(["cat", "dog"] * 50_000, dtype=object)  # two strings, each held 50,000 times
    module = types.ModuleType("__main__")
    grid = np.asfortranarray(np.array([[f"r{i}", f"s{i}\u00e9"] for i in range(5000)], dtype=object))
    module.__dict__.update(frame=frame, labels=labels, grid=grid, raw=np.array(["a\x00b"] * 5000, dtype=object))
    ckpt = Checkpointer(store, "text.ipynb", module)
    first = ckpt.save()
    frame.loc[1_234_567, "product"] = "SKU-renamed"
    second = ckpt.save()
    # The text of one column is 20 MB in five chunks: one changed string writes one of them, compressed.
    assert store.get(second).new_bytes < store.get(first).new_bytes / 10
    frame.loc[3, "price"] = -1.0
    ckpt.save()
    report = ckpt.undo()
    assert report.patched == ["frame"] and frame.loc[3, "price"] != -1.0  # the text was not read again
    fresh = types.ModuleType("__main__")
    Checkpointer(store, "text.ipynb", fresh).restore(second)
    pd.testing.assert_frame_equal(fresh.__dict__["frame"], frame)
    assert fresh.__dict__["frame"]["note"].iloc[9] is None
    assert list(fresh.__dict__["labels"]) == list(labels) and len(set(map(id, fresh.__dict__["labels"]))) == 2
    assert list(fresh.__dict__["raw"]) == ["a\x00b"] * 5000  # a separator inside a string: pickled as before
    assert fresh.__dict__["grid"].flags.f_contiguous and (fresh.__dict__["grid"] == grid).all()


def test_compressible_chunks_written_and_read_in_parallel_round_trip(store: Store) -> None:
    module = types.ModuleType("__main__")
    steps = np.repeat(np.arange(40_000, dtype=float), 100)  # 32 MB in eight distinct, compressible chunks
    module.__dict__["steps"] = steps
    cid = Checkpointer(store, "steps.ipynb", module).save()
    assert store.get(cid).new_bytes < steps.nbytes / 10  # compressed
    for _ in range(3):
        fresh = types.ModuleType("__main__")
        Checkpointer(store, "steps.ipynb", fresh).restore(cid)
        assert np.array_equal(fresh.__dict__["steps"], steps)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "float64", "complex128", "uint8", "datetime64[ns]"])
def test_arrays_are_stored_compressed_and_come_back_exact_from_an_undo_and_a_restore(store: Store, dtype: str) -> None:
    # Items of 2 to 16 bytes (datetimes too) are shuffled before compression (2 to 8 chunks each), bytes as they are.
    module = types.ModuleType("__main__")
    values = np.random.default_rng(4).integers(0, 16, 3_000_000).astype(dtype)
    module.__dict__["values"] = values
    ckpt = Checkpointer(store, "values.ipynb", module)
    first = ckpt.save()
    assert store.get(first).new_bytes < 0.6 * values.nbytes
    before = values.copy()
    values[2_500_000] += 1  # in the last chunk
    ckpt.save()
    assert ckpt.undo().patched == ["values"]
    assert np.array_equal(module.__dict__["values"], before)
    fresh = types.ModuleType("__main__")
    Checkpointer(store, "values.ipynb", fresh).restore(first)
    assert fresh.__dict__["values"].dtype == before.dtype and np.array_equal(fresh.__dict__["values"], before)


def test_timestamps_compress_by_their_8_byte_items(store: Store) -> None:
    # A minute apart: their high bytes are alike item after item, which only a shuffle by 8 bytes lines up.
    minutes = np.datetime64("2024-01-01T00:00", "ns") + np.arange(1_000_000) * np.timedelta64(1, "m")
    module = types.ModuleType("__main__")
    module.__dict__["minutes"] = minutes
    cid = Checkpointer(store, "minutes.ipynb", module).save()
    assert store.get(cid).new_bytes < minutes.nbytes / 20
    fresh = types.ModuleType("__main__")
    Checkpointer(store, "minutes.ipynb", fresh).restore(cid)
    assert fresh.__dict__["minutes"].dtype == minutes.dtype and np.array_equal(fresh.__dict__["minutes"], minutes)


def test_short_of_memory_a_cell_waits_for_the_write_in_progress(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("__main__")
    module.__dict__["big"] = np.random.default_rng(0).random(50_000_000)  # 400 MB: its child writes a while
    notes: list[str] = []
    ckpt = Checkpointer(store, "memory.ipynb", module, notify=notes.append, background=True)
    ckpt.record_cell(1, "big = ...", True, 1.0)
    assert ckpt.save(trigger="cell", cell=1) is None  # forked

    # Too little memory for a second child (a stand-in for /proc/meminfo): the cell's request is owed,
    # not written inline in front of the child's, which would put the timeline out of order.
    monkeypatch.setattr(checkpointer, "fork_unsafe_reason", lambda: "only 10 MiB of memory free")
    module.__dict__["step"] = 1
    ckpt.record_cell(2, "step = 1", True, 0.1)
    assert ckpt.save(trigger="cell", cell=2) is None
    module.__dict__["step"] = 2  # the owed checkpoint holds the state when it is taken

    ckpt.wait()
    records = ckpt.checkpoints()
    assert [r.cell for r in records] == [1, 2]
    assert store.manifest(records[-1].id)["variables"]["step"]["repr"] == "2"
    assert notes == ["jupyter-ckpt: writing checkpoints in the kernel itself: only 10 MiB of memory free"]


class OnlyInTheKernel:
    """Saved as the kernel saves it; in a forked writer, it waits for what a fork does not copy (as a lock another
    thread held at the fork, or torch's thread team, made a writer wait), forever."""

    def __init__(self, kernel: int) -> None:
        self.kernel = kernel

    def __reduce__(self) -> tuple[Any, ...]:
        if os.getpid() != self.kernel:
            threading.Event().wait()
        return OnlyInTheKernel, (self.kernel,)


def test_a_writer_stuck_in_its_fork_is_stopped_and_the_kernel_writes_the_state_itself(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = types.ModuleType("__main__")
    module.__dict__["obj"] = OnlyInTheKernel(os.getpid())
    notes: list[str] = []
    ckpt = Checkpointer(store, "stuck.ipynb", module, notify=notes.append, background=True)
    assert ckpt._fork is not None
    monkeypatch.setattr(ckpt._fork, "_stall", 1.0)  # 30 s in a kernel
    ckpt.record_cell(1, "obj = OnlyInTheKernel(...)", True, 0.1)
    ckpt.save(trigger="cell", cell=1)
    started = time.monotonic()
    ckpt.wait()  # waited forever
    assert time.monotonic() - started < 20
    assert [r.cell for r in ckpt.checkpoints()] == [1]  # written by the kernel once the writer was stopped
    assert "waited 1 s without running" in notes[0] and "writing checkpoints in the kernel itself" in notes[-1]


def test_no_garbage_collection_runs_while_a_checkpoint_is_unpickled(store: Store) -> None:
    module = types.ModuleType("__main__")
    module.__dict__["users"] = [{"id": i, "tags": [i]} for i in range(200_000)]  # 400,000 objects to rebuild
    cid = Checkpointer(store, "objs.ipynb", module).save()
    fresh = types.ModuleType("__main__")
    restorer = Checkpointer(store, "objs.ipynb", fresh)
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(count)
    try:
        restorer.restore(cid)
    finally:
        gc.callbacks.remove(count)
    assert fresh.__dict__["users"] == module.__dict__["users"]
    assert len(collections) < 10  # about one per 700 objects made (~570 here) when the collector runs along


@pytest.mark.skipif(sys.version_info[:2] == (3, 14), reason="3.14's incremental collector has no full collections")
def test_no_automatic_full_collection_runs_while_a_write_shares_the_heap(store: Store) -> None:
    module = types.ModuleType("__main__")
    module.__dict__["records"] = [{"id": i, "tags": [i]} for i in range(300_000)]  # 600,000 tracked objects
    module.__dict__["big"] = np.random.default_rng(0).random(30_000_000)  # 240 MB: its child writes a while
    ckpt = Checkpointer(store, "gc.ipynb", module, background=True)
    thresholds = gc.get_threshold()
    full: list[int] = []
    kept: list[list[list[int]]] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(info["generation"])

    gc.callbacks.append(count)
    try:
        ckpt.record_cell(1, "records = ...", True, 1.0)
        assert ckpt.save(trigger="cell", cell=1) is None  # forked
        kept.append([[i] for i in range(1_000_000)])  # enough new objects to start a full collection
        assert ckpt.status()["writing"]  # the child shared the heap all along
        held = len(full)
        ckpt.wait()
        kept.append([[i] for i in range(1_000_000)])
    finally:
        gc.callbacks.remove(count)
    assert held == 0  # with the heap shared, one full collection copied ~14,000 of its pages here
    assert len(full) > held  # and they run again once the write is done
    assert gc.get_threshold() == thresholds


def _run_cells(ckpt: Checkpointer, module: types.ModuleType, cells: list[str]) -> None:
    for count, source in enumerate(cells, start=1):
        ckpt.before_cell()
        exec(source, module.__dict__)
        ckpt.after_cell(count, source, True, 0.5)
    ckpt.wait()


def test_a_cell_that_only_drew_random_numbers_is_a_state_an_undo_and_last_good_stop_at(store: Store) -> None:
    cells = ["import random\nrandom.seed(1)\nx = 2", "r1 = random.random()", "print(random.random())", "print(0)"]
    random.seed(1)
    drawn = [random.random() for _ in range(3)]
    module = types.ModuleType("__main__")
    ckpt = Checkpointer(store, "draws.ipynb", module)
    ckpt.set_policy(every=1)
    _run_cells(ckpt, module, cells)
    changed = [["random", "x"], ["r1", "random streams"], ["random streams"], []]
    assert [sorted(r.changed) for r in ckpt.checkpoints()] == changed
    ckpt.restore("last-good")  # the last cell's, which is the third's: it drew the second number
    assert random.random() == drawn[2]

    module = types.ModuleType("__main__")
    ckpt = Checkpointer(store, "undo.ipynb", module)
    ckpt.set_policy(every=1)
    _run_cells(ckpt, module, cells[:3])
    ckpt.undo()  # the third cell's draw is undone, not the second's ``r1`` with it
    assert random.random() == drawn[1] and module.__dict__["r1"] == drawn[0]


def test_a_checkpoint_no_cell_asked_for_is_recorded_after_the_cell_its_state_follows(store: Store) -> None:
    module = types.ModuleType("__main__")
    ckpt = Checkpointer(store, "manual.ipynb", module)
    ckpt.set_policy(auto=False)
    _run_cells(ckpt, module, ["a = 1", "b = 2"])
    first = ckpt.save(tag="after-b")
    assert ckpt.here(every=0.0) and not ckpt.here(every=60.0)  # whether it took one: the second is too soon
    ckpt.wait()
    ckpt.restore(first)
    ckpt.save()
    assert [(r.trigger, r.cell) for r in ckpt.checkpoints()] == [
        ("manual", 2),
        ("loop", 2),
        ("restore", 2),
        ("manual", 2),
    ]


def test_a_change_made_between_cells_is_undone(store: Store) -> None:
    module = types.ModuleType("__main__")
    module.__dict__.update(table=np.random.default_rng(0).random((3_000, 1_000)), small=[1, 2])
    ckpt = Checkpointer(store, "between.ipynb", module)
    first = ckpt.save()
    # As a widget callback or a thread would: no cell ran, no checkpoint saw it, the objects are the same.
    module.__dict__["table"][7, :] = -1.0
    module.__dict__["small"].append(3)
    report = ckpt.restore(first)
    assert report.patched == ["table"] and report.loaded == ["small"]
    assert np.array_equal(module.__dict__["table"], np.random.default_rng(0).random((3_000, 1_000)))
    assert module.__dict__["small"] == [1, 2]


def test_an_undo_with_no_state_before_says_why_and_changes_nothing(store: Store) -> None:
    module = types.ModuleType("__main__")
    # No budget: every boundary that a next cell reaches before the idle grace is skipped, as under Run All.
    ckpt = Checkpointer(store, "back-to-back.ipynb", module, scheduler=Scheduler(budget=0.0, grace=0.0))
    for count, source in enumerate(["a = 1", "b = 2", "c = 3"], start=1):
        ckpt.before_cell()
        exec(source, module.__dict__)
        ckpt.after_cell(count, source, True, 0.5)
    ckpt.idle_tick()  # the last cell's state, taken once the kernel is idle: the only one on the timeline
    ckpt.wait()
    with pytest.raises(UnknownCheckpoint) as raised:
        ckpt.undo()
    assert str(raised.value) == (
        "the timeline does not reach 1 state(s) back: the oldest it reaches is #1 (after cell 3), and no state "
        "before it was checkpointed. Cell boundaries this kernel did not checkpoint: 2 back to back, over the "
        "overhead budget (`%checkpoint auto on --every 1` checkpoints every cell)"
    )
    assert {n: module.__dict__[n] for n in "abc"} == {"a": 1, "b": 2, "c": 3}
    assert [r.cell for r in ckpt.checkpoints()] == [3]  # the failed undo put nothing on the timeline
    # Good cells back to back, then one that fails: the error says their states were skipped (it said only that
    # no checkpoint finished without error, as if no cell had).
    failing = Checkpointer(store, "fails.ipynb", module, scheduler=Scheduler(budget=0.0, grace=0.0))
    for count, (source, ok) in enumerate([("a = 1", True), ("b = 2", True), ("1/0", False)], start=1):
        failing.before_cell()
        failing.after_cell(count, source, ok, 0.5)
    failing.idle_tick()
    with pytest.raises(UnknownCheckpoint) as raised:
        failing.restore("last-good")
    assert str(raised.value) == (
        "no checkpoint of this session finished without error. Cell boundaries this kernel did not checkpoint: "
        "2 back to back, over the overhead budget (`%checkpoint auto on --every 1` checkpoints every cell)"
    )


def _importable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, code: str) -> None:
    """Write the module ``name`` from ``code`` where the next ``import`` finds it, and not imported yet."""
    (tmp_path / f"{name}.py").write_text(code)
    monkeypatch.syspath_prepend(tmp_path)
    monkeypatch.delitem(sys.modules, name, raising=False)


def _with_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, library: str, name: str, cell: str
) -> types.ModuleType:
    """A notebook that imports the module ``name`` (written in ``tmp_path`` from ``library``) and then runs ``cell``."""
    _importable(tmp_path, monkeypatch, name, library)
    module = types.ModuleType("__main__")
    exec(f"import {name}\n{cell}", module.__dict__)
    return module


def _before_an_import(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, code: str
) -> tuple[types.ModuleType, Checkpointer, int]:
    """A notebook checkpointed before a cell imports the module ``name`` (``code``, not imported yet)."""
    _importable(tmp_path, monkeypatch, name, code)
    module = types.ModuleType("__main__")
    module.__dict__["rows"] = [1]
    ckpt = Checkpointer(store, f"{name}.ipynb", module)
    return module, ckpt, ckpt.save()


def test_a_class_registered_with_a_library_is_registered_again_and_the_registration_is_a_change(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _with_library(
        tmp_path,
        monkeypatch,
        "import abc\nclass Shape(abc.ABC):\n    pass\n",
        "shapes",
        "class Square:\n    pass\nclass Circle:\n    pass\n",
    )
    ckpt = Checkpointer(store, "shapes.ipynb", module)
    ckpt.save()
    sys.modules["shapes"].Shape.register(module.__dict__["Square"])  # a cell that only registers: a new state
    registered = ckpt.save()
    assert ckpt.diff("-1", registered).changed == {}  # no variable changed, yet the timeline shows the change
    record = next(r for r in ckpt.checkpoints() if r.id == registered)
    assert record.changed == ["Square registered with shapes.Shape"]

    # As in a new kernel: the library imported afresh knows nothing of the notebook's class.
    del sys.modules["shapes"]
    report = ckpt.restore(registered)
    assert report.not_restored == {}
    shape = sys.modules["shapes"].Shape
    assert issubclass(module.__dict__["Square"], shape) and not issubclass(module.__dict__["Circle"], shape)

    # The library gone: the registration is named with why, and the classes come back all the same.
    del sys.modules["shapes"]
    (tmp_path / "shapes.py").unlink()
    exec("del Square, Circle", module.__dict__)
    report = ckpt.restore(registered)
    assert report.not_restored["shapes"] == "import shapes failed: ModuleNotFoundError: No module named 'shapes'"
    assert report.not_restored["Square registered with shapes.Shape"] == (
        "not registered again: ModuleNotFoundError: No module named 'shapes'"
    )
    assert {"Square", "Circle"} <= set(report.loaded)


def test_warning_filters_come_back_and_an_undo_takes_back_one_set_after(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _with_library(
        tmp_path,
        monkeypatch,
        "class NoiseWarning(UserWarning):\n    pass\n",
        "noise",
        "class NbWarning(UserWarning):\n    pass\n",
    )
    nb_warning, started = module.__dict__["NbWarning"], list(warnings.filters)  # pytest's own, put back after
    ckpt = Checkpointer(store, "warnings.ipynb", module)
    ckpt.save()
    warnings.filterwarnings("ignore", message="quiet", category=nb_warning)
    warnings.simplefilter("ignore", sys.modules["noise"].NoiseWarning)
    warnings.simplefilter("error", ResourceWarning, append=True)
    set_filters = ckpt.save()  # a cell that only set filters: a new state
    at_set = list(warnings.filters)
    record = next(r for r in ckpt.checkpoints() if r.id == set_filters)
    assert record.changed == ["warnings filters"] and ckpt.diff("-1", set_filters).changed == {}
    assert store.manifest(set_filters)["warnings"] == {
        "front": [["ignore", None, "noise:NoiseWarning", None, 0], ["ignore", "quiet", "__main__:NbWarning", None, 0]],
        "end": [["error", None, "builtins:ResourceWarning", None, 0]],
    }

    warnings.resetwarnings()  # a cell that clears them all, every starting one too, and sets another
    warnings.filterwarnings("always", category=DeprecationWarning)
    ckpt.save()
    assert ckpt.restore(set_filters).not_restored == {}  # the undo
    assert warnings.filters == at_set

    # As in a new kernel: the starting filters only, the notebook's category gone, the library imported afresh.
    warnings.filters[:] = started
    exec("del NbWarning", module.__dict__)
    del sys.modules["noise"]
    report = Checkpointer(store, "warnings.ipynb", module).restore(set_filters)
    assert report.not_restored == {}
    restored = module.__dict__["NbWarning"]
    assert restored is not nb_warning and warnings.filters[1][2] is restored
    warnings.warn("quiet, please", restored, stacklevel=1)  # silenced; pytest makes every other warning an error
    with pytest.raises(restored, match="loud"):
        warnings.warn("loud", restored, stacklevel=1)

    # The library gone: its filter is named with why, and the others are set all the same.
    warnings.filters[:] = started
    del sys.modules["noise"]
    (tmp_path / "noise.py").unlink()
    report = Checkpointer(store, "warnings.ipynb", module).restore(set_filters)
    assert report.not_restored["warnings filter ignore noise:NoiseWarning"] == (
        "not set again: ModuleNotFoundError: No module named 'noise'"
    )
    quiet = ("ignore", re.compile("quiet", re.I), module.__dict__["NbWarning"], None, 0)
    assert warnings.filters == [quiet, *started, at_set[-1]]


def _to_stdout(logger: logging.Logger) -> list[str | None]:
    """The formats of the handlers that write ``logger``'s records to the notebook's output."""
    return [
        h.formatter._fmt if h.formatter else None
        for h in logger.handlers
        if isinstance(h, logging.StreamHandler) and h.stream is sys.stdout
    ]


def test_an_undo_leaves_the_filters_a_library_imported_since_set_for_its_warnings(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    library = (
        "import warnings\nclass HushedWarning(UserWarning):\n    pass\n"
        "warnings.filterwarnings('ignore', category=HushedWarning)\n"
    )
    module, ckpt, before = _before_an_import(store, tmp_path, monkeypatch, "hushed", library)
    started = list(warnings.filters)
    # A cell that imports a library, which silences its own warning, and sets a filter of the notebook's: it
    # shows the module it imported, not what its import set up.
    hushed = module.__dict__["hushed"] = importlib.import_module("hushed")
    warnings.filterwarnings("error", category=FutureWarning)
    imported = ckpt.save()
    assert next(r for r in ckpt.checkpoints() if r.id == imported).changed == ["hushed"]
    assert ckpt.restore(before).not_restored == {}  # the undo
    assert warnings.filters == [("ignore", None, hushed.HushedWarning, None, 0), *started]


@pytest.fixture
def logging_put_back() -> Iterator[None]:
    """The test changes the process's loggers: pytest's own set-up again after it."""
    root, level, handlers = logging.getLogger(), logging.getLogger().level, list(logging.getLogger().handlers)
    yield
    root.setLevel(level)
    root.handlers[:] = handlers
    for name in ("app", "noisy", "chatty"):  # gone, as if never made
        logger = logging.root.manager.loggerDict.pop(name, None)
        for handler in logger.handlers if isinstance(logger, logging.Logger) else ():
            handler.close()
    logging.disable(logging.NOTSET)


def test_the_logging_set_up_comes_back_and_an_undo_takes_back_what_was_set_after(
    store: Store, tmp_path: Path, logging_put_back: None
) -> None:
    module = types.ModuleType("__main__")
    module.__dict__["rows"] = [1]
    ckpt = Checkpointer(store, "logs.ipynb", module)
    ckpt.save()
    root, app = logging.getLogger(), logging.getLogger("app")
    shown = logging.StreamHandler(sys.stdout)  # what basicConfig(level=INFO, format=...) makes, to stdout
    shown.setFormatter(logging.Formatter("%(levelname)s|%(message)s"))
    root.addHandler(shown)
    root.setLevel(logging.INFO)
    (tmp_path / "logs").mkdir()
    written = logging.FileHandler(tmp_path / "logs" / "app.log")
    written.setLevel(logging.DEBUG)
    app.addHandler(written)
    app.setLevel(logging.DEBUG)
    app.propagate = False
    logging.getLogger("noisy").setLevel(logging.ERROR)
    configured = ckpt.save()  # a cell that only set up logging: a new state
    assert next(r for r in ckpt.checkpoints() if r.id == configured).changed == ["logging"]
    to_file = {"kind": "file", "path": str(tmp_path / "logs" / "app.log"), "encoding": "locale", "level": 10}
    to_stdout = {"kind": "stream", "stream": "stdout", "level": 0}
    format_ = {"format": "%(levelname)s|%(message)s", "datefmt": None, "style": "%"}
    assert store.manifest(configured)["logging"]["loggers"] == {
        "app": {"level": 10, "propagate": False, "disabled": False, "handlers": [{**to_file, "formatter": None}]},
        "noisy": {"level": 40, "propagate": True, "disabled": False, "handlers": []},
        "root": {"level": 20, "propagate": True, "disabled": False, "handlers": [{**to_stdout, "formatter": format_}]},
    }
    app.debug("before")

    root.removeHandler(shown)  # a cell that undoes some of it, and silences everything
    app.addHandler(logging.StreamHandler(sys.stderr))
    logging.getLogger("noisy").setLevel(logging.NOTSET)
    logging.disable(logging.CRITICAL)
    ckpt.save()
    assert ckpt.restore(configured).not_restored == {}  # the undo: the handler still on its logger is kept
    assert _to_stdout(root) == ["%(levelname)s|%(message)s"] and root.level == logging.INFO
    assert app.handlers == [written]
    assert logging.getLogger("noisy").level == logging.ERROR and logging.root.manager.disable == logging.NOTSET

    # As in a new kernel: none of it set up. The log file is appended to, not truncated.
    for logger in (root, app):
        logger.handlers[:] = [h for h in logger.handlers if h not in (shown, written)]
    written.close()
    root.setLevel(logging.WARNING)
    app.setLevel(logging.NOTSET)
    report = Checkpointer(store, "logs.ipynb", module).restore(configured)
    assert report.not_restored == {}
    assert _to_stdout(root) == ["%(levelname)s|%(message)s"]
    app.debug("after")
    app.handlers[0].flush()
    assert (tmp_path / "logs" / "app.log").read_text() == "before\nafter\n"

    # The log's directory gone: that handler is named with why, and the rest is set all the same.
    app.handlers[0].close()
    app.handlers.clear()
    (tmp_path / "logs" / "app.log").unlink()
    (tmp_path / "logs").rmdir()
    root.setLevel(logging.WARNING)
    report = Checkpointer(store, "logs.ipynb", module).restore(configured)
    ((label, why),) = report.not_restored.items()
    assert label == f"logging handler to {tmp_path / 'logs' / 'app.log'} of logger 'app'"
    assert why.startswith("not made again: [Errno 2] No such file or directory")
    assert root.level == logging.INFO and app.level == logging.DEBUG and app.handlers == []


def test_a_handler_a_variable_holds_goes_back_on_its_logger_as_that_variable(
    store: Store, logging_put_back: None
) -> None:
    module = types.ModuleType("__main__")
    records = module.__dict__["records"] = io.StringIO()
    ckpt = Checkpointer(store, "handlers.ipynb", module)
    ckpt.save()
    app = logging.getLogger("app")
    held = module.__dict__["handler"] = logging.StreamHandler(records)  # a cell that logs into a buffer
    app.addHandler(held)
    configured = ckpt.save()
    assert store.manifest(configured)["logging"]["loggers"]["app"]["handlers"] == [
        {"kind": "variable", "name": "handler"}
    ]

    app.removeHandler(held)  # a cell that swaps it for another
    other = module.__dict__["handler"] = logging.StreamHandler(io.StringIO())
    app.addHandler(other)
    ckpt.save()
    assert ckpt.restore(configured).not_restored == {}  # the undo: the one it held then, and not the other
    assert app.handlers == [module.__dict__["handler"]] and module.__dict__["handler"] is not other

    app.handlers.clear()  # as in a new kernel
    fresh = types.ModuleType("__main__")
    assert Checkpointer(store, "handlers.ipynb", fresh).restore(configured).not_restored == {}
    (restored,) = app.handlers
    assert restored is fresh.__dict__["handler"] and restored.stream is fresh.__dict__["records"]
    app.warning("logged")
    assert fresh.__dict__["records"].getvalue() == "logged\n"


def test_an_undo_leaves_the_loggers_of_a_module_imported_since_as_that_module_set_them_up(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logging_put_back: None
) -> None:
    library = (
        "import logging, sys\nlog = logging.getLogger('chatty')\nlog.propagate = False\n"
        "log.addHandler(logging.StreamHandler(sys.stderr))\n"
    )
    _, ckpt, before = _before_an_import(store, tmp_path, monkeypatch, "chatty", library)
    importlib.import_module("chatty")  # a cell that imports a library that sets up its own logger
    logging.getLogger("noisy").setLevel(logging.DEBUG)  # and sets up one of the notebook's
    assert store.manifest(ckpt.save())["logging"]["loggers"].keys() == {"chatty", "noisy"}
    assert ckpt.restore(before).not_restored == {}  # the undo
    chatty = logging.getLogger("chatty")
    assert not chatty.propagate and len(chatty.handlers) == 1  # still imported, still as it set itself up
    assert logging.getLogger("noisy").level == logging.NOTSET


def test_groups_a_restore_keeps_do_not_share_what_they_did_not_share(store: Store) -> None:
    module = types.ModuleType("__main__")
    module.__dict__.update(a=[[1]], b=[[1]])
    ckpt = Checkpointer(store, "alias.ipynb", module)
    first = ckpt.save()
    module.__dict__["b"][0] = module.__dict__["a"][0]  # each pickles as before, but now they share a list
    ckpt.restore(first)
    a, b = module.__dict__["a"], module.__dict__["b"]
    a[0].append(2)
    assert b == [[1]]


def test_a_message_the_catalog_cannot_store_is_refused_before_anything_is_written(store: Store) -> None:
    """Half a character (a lone surrogate, which JSON and Python strings allow) failed the catalog's write after
    the checkpoint's data was stored."""
    module = types.ModuleType("__main__")
    module.__dict__["x"] = [1, 2]
    ckpt = Checkpointer(store, "message.ipynb", module)
    blobs = sorted(p.name for p in store.blobs.root.rglob("*") if p.is_file())
    for message, why in (("half \ud800", "lone surrogate"), (b"bytes", "must be text")):
        with pytest.raises(BadArgument, match=why):
            ckpt.save(message=message)  # type: ignore[arg-type]
    assert ckpt.checkpoints() == [] and sorted(p.name for p in store.blobs.root.rglob("*") if p.is_file()) == blobs
    ckpt.save(message="whole ✓")
    assert [r.message for r in ckpt.checkpoints()] == ["whole ✓"]


def writer_results(store: Store) -> list[Path]:
    """The result files the store's writers left, once there is one (within 30 s)."""
    deadline = time.monotonic() + 30
    while not (results := list(store.blobs.tmp.glob("result.*.json"))):
        assert time.monotonic() < deadline, "the writer left no result"
        time.sleep(0.01)
    return results


def test_an_error_put_in_the_place_of_a_writer_s_result_is_not_acted_on(store: Store) -> None:
    """A writer that fails leaves its error in its result file, and one that ran out of room makes the kernel thin
    the store and leave out of its checkpoints what is larger than the budget. The error was not signed: anyone who
    could write the store could put "StoreFullError: ..." there. Only an error its own writer signed is acted on."""
    module = types.ModuleType("__main__")
    module.big = np.random.default_rng(0).random(1_000_000)  # type: ignore[attr-defined]
    said: list[str] = []
    ckpt = Checkpointer(store, "planted.ipynb", module, background=True, notify=said.append)
    ckpt.record_cell(1, "big = ...", True, 1.0)
    ckpt.save(trigger="cell", cell=1)
    results = writer_results(store)
    results[0].write_text('{"error": "StoreFullError: the disk under the store is full"}')
    ckpt.commit_finished()
    ckpt.wait()
    assert any("fails its signature check" in message for message in said), said
    ckpt.save()  # and the next checkpoint holds the state
    assert [r.changed for r in ckpt.checkpoints()] == [["big"]]


def test_a_dead_kernel_s_finished_state_is_adopted_after_a_newest_checkpoint_that_is_damaged(store: Store) -> None:
    """A gc adopts the result a dead kernel's writer finished, after the newest checkpoint of its notebook. With that
    newest checkpoint's manifest damaged (changed by hand), the state was dropped as if its blobs were gone."""
    module = types.ModuleType("__main__")
    module.x = 1  # type: ignore[attr-defined]
    ckpt = Checkpointer(store, "damaged.ipynb", module, background=True)
    ckpt.save()
    module.x = 2  # type: ignore[attr-defined]
    ckpt.record_cell(2, "x = 2", True, 0.1)
    ckpt.save(trigger="cell", cell=2)
    results = writer_results(store)
    time.sleep(0.2)  # its writer exits
    dead = subprocess.Popen(["true"])  # a pid no process has any more
    dead.wait()
    result = store.unseal(json.loads(results[0].read_text()), "a result")
    results[0].write_text(json.dumps(store.seal({**result, "kernel": [dead.pid, 1]})))  # its kernel was killed
    results[0].rename(results[0].with_name(f"result.{dead.pid}-1.2.json"))  # the name says whose it is too
    with sqlite3.connect(store.root / "catalog.sqlite") as db:
        db.execute("UPDATE checkpoints SET mac='0' WHERE id=?", (ckpt.head,))
    Timeline(store).gc(None, 20, None)
    (adopted,) = [r for r in store.checkpoints("damaged.ipynb") if r.cell == 2]
    fresh = types.ModuleType("__main__")
    restore_namespace(store.blobs, fresh, adopted.id, store.manifest(adopted.id))
    assert fresh.x == 2  # type: ignore[attr-defined]

"""restore.py on its own: checkpoints written through capture and the store, restored into plain modules."""

from __future__ import annotations

import random
import sys
import textwrap
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import huge_bytes

from jupyter_ckpt.capture import Meta, collect, link, prepare
from jupyter_ckpt.checkpointer import Checkpointer
from jupyter_ckpt.errors import BadArgument, IntegrityError
from jupyter_ckpt.manifest import Manifest
from jupyter_ckpt.memory import libc
from jupyter_ckpt.recipes import exec_cell, plan, run_recipe
from jupyter_ckpt.restore import diff_manifests, restore_namespace
from jupyter_ckpt.store import Store

TABLE = 32 << 20  # bytes of a large array

NOTEBOOK = """
import numpy as np
data = [1, 2, 3]
alias = data
holder = {"data": data, "label": "first"}
base = np.arange(1_000.0)
view = base[100:200:2]
scale = 3
def scaled(x):
    return x * scale
class Point:
    def __init__(self, x):
        self.x = x
p = Point(4)
"""


@pytest.fixture(autouse=True)
def _keep_random_states() -> Iterator[None]:
    """Restores set the global random states: give them back to the other tests as they were."""
    states = random.getstate(), np.random.get_state()
    yield
    random.setstate(states[0])
    np.random.set_state(states[1])


def notebook(code: str = NOTEBOOK) -> types.ModuleType:
    module = types.ModuleType("__main__")
    exec(textwrap.dedent(code), module.__dict__)
    return module


def save(store: Store, module: types.ModuleType, parent: int | None = None) -> tuple[int, Manifest]:
    """Checkpoint ``module`` as a kernel would: collect, prepare, link, commit; returns the id and stored manifest."""
    meta = Meta(session="nb.ipynb", cell=1, last_cell=None, trigger="manual", status="ok", at=1_000.0)
    manifest, blobs = prepare(store.blobs, module, collect(module.__dict__, (), ()), meta)
    linked = link(manifest, parent, store.manifest(parent) if parent is not None else None)
    cid = store.commit("nb.ipynb", linked, blobs)
    return cid, store.manifest(cid)


def user_names(module: types.ModuleType) -> list[str]:
    return sorted(n for n in module.__dict__ if not n.startswith("__"))


def test_a_fresh_module_gets_every_value_back(store: Store) -> None:
    cid, manifest = save(store, notebook())
    fresh = types.ModuleType("__main__")
    report = restore_namespace(store.blobs, fresh, cid, manifest)
    ns = fresh.__dict__
    assert user_names(fresh) == ["Point", "alias", "base", "data", "holder", "np", "p", "scale", "scaled", "view"]
    assert sorted(report.loaded) == [n for n in user_names(fresh) if n != "np"] and report.modules == ["np"]
    assert report.removed == [] and report.not_restored == {}
    assert ns["np"] is np
    assert ns["data"] == [1, 2, 3] and ns["holder"]["label"] == "first"
    assert np.array_equal(ns["base"], np.arange(1_000.0)) and list(ns["view"]) == list(range(100, 200, 2))
    assert ns["scaled"](2) == 6  # the restored function reads the restored module's globals
    assert isinstance(ns["p"], ns["Point"]) and ns["p"].x == 4


def test_objects_shared_before_are_shared_after(store: Store) -> None:
    cid, manifest = save(store, notebook())
    fresh = types.ModuleType("__main__")
    restore_namespace(store.blobs, fresh, cid, manifest)
    ns = fresh.__dict__
    assert ns["alias"] is ns["data"] and ns["holder"]["data"] is ns["data"]
    ns["data"].append(4)
    assert ns["holder"]["data"] == [1, 2, 3, 4]


def test_a_view_comes_back_as_a_view_of_its_restored_base(store: Store) -> None:
    cid, manifest = save(store, notebook())
    fresh = types.ModuleType("__main__")
    restore_namespace(store.blobs, fresh, cid, manifest)
    base, view = fresh.__dict__["base"], fresh.__dict__["view"]
    assert np.shares_memory(base, view)
    base[102] = -1.0
    assert view[1] == -1.0


def test_a_memory_map_of_a_file_is_stored_as_its_place_and_mapped_again(store: Store, tmp_path: Path) -> None:
    data, log = tmp_path / "data.bin", tmp_path / "log.bin"
    np.arange(1 << 20, dtype=np.float64).tofile(data)  # 8 MiB
    module = types.ModuleType("__main__")
    ns = module.__dict__
    ns["table"] = np.memmap(data, dtype=np.float64, mode="r", offset=8, shape=(1000, 1000))  # read-only
    ns["rows"] = ns["table"][10:20]
    ns["log"] = np.memmap(log, dtype=np.int32, mode="w+", shape=(64,))  # the cells' work: put back in its file
    ns["log"][:] = 3
    ns["draft"] = np.memmap(data, dtype=np.float64, mode="c", shape=(16,))  # copy on write: changes are the cells'
    ns["draft"][0] = -1.0
    cid, manifest = save(store, module)
    assert store.get(cid).new_bytes < 64 << 10  # not the read-only file's 8 MiB
    ns["log"][:] = 4  # a later cell

    fresh = types.ModuleType("__main__")
    assert restore_namespace(store.blobs, fresh, cid, manifest).not_restored == {}
    table, rows, log_again = fresh.__dict__["table"], fresh.__dict__["rows"], fresh.__dict__["log"]
    assert (
        type(table) is np.memmap and table.filename == str(data) and table.offset == 8 and table.shape == (1000, 1000)
    )
    assert not table.flags.writeable and table[0, 0] == 1.0 and np.shares_memory(table, rows) and rows[0, 0] == 10_001.0
    assert type(rows) is np.memmap and rows.filename == str(data)
    assert log_again.tolist() == [3] * 64 and np.fromfile(log, dtype=np.int32).tolist() == [3] * 64
    assert (log_again.filename, log_again.mode) == (str(log), "w+")
    log_again[0] = 5
    log_again.flush()
    assert np.fromfile(log, dtype=np.int32)[0] == 5  # a write through it reaches the file, as it did
    assert fresh.__dict__["draft"][0] == -1.0 and np.fromfile(data, count=1)[0] == 0.0

    data.unlink()  # the file gone: that map is named with why, and the rest comes back
    fresh = types.ModuleType("__main__")
    report = restore_namespace(store.blobs, fresh, cid, manifest)
    assert set(report.not_restored) == {"table", "rows"} and fresh.__dict__["draft"][0] == -1.0  # all its own bytes
    assert "the file a numpy.memmap mapped is gone" in report.not_restored["table"]


def test_random_states_continue_the_same_stream(store: Store) -> None:
    module = notebook("x = 1")
    cid, manifest = save(store, module)
    expected = [random.random() for _ in range(3)], np.random.rand(3).tolist()
    random.seed(99)
    np.random.seed(99)
    restore_namespace(store.blobs, module, cid, manifest)
    assert ([random.random() for _ in range(3)], np.random.rand(3).tolist()) == expected


def test_variables_made_since_are_removed_but_hidden_and_excluded_ones_stay(store: Store) -> None:
    module = notebook()
    cid, manifest = save(store, module)
    module.__dict__.update(late=1, token="s3cret", scratch=[0], _5="an output", Out={5: "an output"})
    del module.__dict__["scale"]
    report = restore_namespace(store.blobs, module, cid, manifest, hidden=["token"], exclude=["scratch"])
    assert report.removed == ["late"]
    assert "late" not in module.__dict__ and module.__dict__["scale"] == 3
    assert module.__dict__["token"] == "s3cret" and module.__dict__["scratch"] == [0]
    assert module.__dict__["_5"] == "an output" and "Out" in module.__dict__


def test_only_restores_the_named_variables_and_leaves_the_rest_and_the_random_states(store: Store) -> None:
    module = notebook()
    cid, manifest = save(store, module)
    ns = module.__dict__
    ns.update(scale=10, label="new", late=1)
    ns["holder"]["label"] = "second"
    random.seed(5)
    expected = random.random()
    random.seed(5)
    report = restore_namespace(store.blobs, module, cid, manifest, only=["scale", "np"])
    assert report.loaded == ["scale"] and report.modules == ["np"] and report.removed == []
    assert ns["scale"] == 3 and ns["late"] == 1 and ns["holder"]["label"] == "second"
    assert random.random() == expected


def test_only_a_name_the_checkpoint_lacks_is_refused_before_anything_changes(store: Store) -> None:
    module = notebook()
    cid, manifest = save(store, module)
    module.__dict__["scale"] = 10
    before = dict(module.__dict__)
    with pytest.raises(BadArgument, match=f"checkpoint {cid} has no variable nope"):
        restore_namespace(store.blobs, module, cid, manifest, only=["scale", "nope"])
    assert module.__dict__ == before


def test_only_a_variable_the_checkpoint_skipped_is_reported_with_its_reason(store: Store) -> None:
    module = notebook("rows = (i for i in range(3))\nx = 1")
    cid, manifest = save(store, module)
    assert list(manifest["skipped"]) == ["rows"]
    report = restore_namespace(store.blobs, module, cid, manifest, only=["rows"])
    assert report.not_restored["rows"].startswith("generator could not be serialized: a generator's paused code")


def test_an_index_built_with_a_defaultdict_points_into_the_restored_list(store: Store) -> None:
    module = notebook("from collections import defaultdict\nrows = [[1], [2]]\nby_key = defaultdict(list, a=rows[0])")
    cid, manifest = save(store, module)
    fresh = types.ModuleType("__main__")
    restore_namespace(store.blobs, fresh, cid, manifest)
    assert fresh.__dict__["by_key"]["a"] is fresh.__dict__["rows"][0]


@pytest.fixture
def gauges(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """An installed module with a class, as a library a notebook imports."""
    library = types.ModuleType("gauges_for_restore_tests")
    exec("class Gauge:\n    def __init__(self, level):\n        self.level = level", library.__dict__)
    monkeypatch.setitem(sys.modules, library.__name__, library)
    return library


@pytest.mark.parametrize("gone", ["class", "module"])
def test_a_variable_whose_class_is_gone_is_left_out_and_named_while_the_rest_comes_back(
    store: Store, gauges: types.ModuleType, monkeypatch: pytest.MonkeyPatch, gone: str
) -> None:
    module = notebook("x = [1, 2]\nlabel = 'kept'")
    module.__dict__["g"] = gauges.Gauge(7)
    cid, manifest = save(store, module)
    if gone == "class":
        monkeypatch.delattr(gauges, "Gauge")
    else:
        monkeypatch.delitem(sys.modules, gauges.__name__)
    fresh = types.ModuleType("__main__")
    report = restore_namespace(store.blobs, fresh, cid, manifest)
    assert user_names(fresh) == ["label", "x"] and fresh.__dict__["x"] == [1, 2]
    assert list(report.not_restored) == ["g"]
    error = "AttributeError" if gone == "class" else "ModuleNotFoundError"
    assert report.not_restored["g"].startswith(f"could not be loaded ({error}")
    assert report.not_restored["g"].endswith("; absent")
    assert "not restored: g (could not be loaded" in report.summary()

    live = notebook("x = None\ng = 'what the user has now'")
    report = restore_namespace(store.blobs, live, cid, manifest)
    assert live.__dict__["g"] == "what the user has now" and live.__dict__["x"] == [1, 2]
    assert report.not_restored["g"].endswith("; kept its current value")


def test_a_module_that_no_longer_imports_is_named_while_the_rest_comes_back(
    store: Store, gauges: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = notebook("x = [1, 2]")
    module.__dict__["gg"] = gauges
    cid, manifest = save(store, module)
    monkeypatch.delitem(sys.modules, gauges.__name__)
    fresh = types.ModuleType("__main__")
    report = restore_namespace(store.blobs, fresh, cid, manifest)
    assert user_names(fresh) == ["x"] and report.modules == []
    assert report.not_restored == {
        "gg": f"import {gauges.__name__} failed: ModuleNotFoundError: No module named '{gauges.__name__}'"
    }


def test_the_diff_of_two_checkpoints_names_what_was_added_removed_and_changed(store: Store) -> None:
    module = notebook("import json\nkept = [1]\nedited = {'a': 1}\ndropped = 'old'")
    first, before = save(store, module)
    exec("import numpy as np\nedited['a'] = 2\ndel dropped, json\nnew = 3.5", module.__dict__)
    _, after = save(store, module, parent=first)
    diff = diff_manifests(before, after)
    assert list(diff.added) == ["new", "np"] and diff.added["np"]["type"] == "module"
    assert diff.added["new"]["repr"] == "3.5"
    assert list(diff.removed) == ["dropped", "json"] and diff.removed["dropped"]["repr"] == "'old'"
    assert list(diff.changed) == ["edited"]
    assert (diff.changed["edited"][0]["repr"], diff.changed["edited"][1]["repr"]) == ("{'a': 1}", "{'a': 2}")
    assert diff.as_dict()["changed"]["edited"]["after"]["repr"] == "{'a': 2}"
    assert diff_manifests(after, after).as_dict() == {"added": {}, "removed": {}, "changed": {}}


def test_a_module_imported_under_an_alias_from_elsewhere_is_a_change(store: Store) -> None:
    module = notebook("import json as j")
    first, before = save(store, module)
    exec("import pickle as j", module.__dict__)
    _, after = save(store, module, parent=first)
    assert list(diff_manifests(before, after).changed) == ["j"]


def _flip_last_byte(store: Store, key: str) -> None:
    path = store.blobs.path(key)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


def _stream_of(manifest: Manifest, name: str) -> str:
    return next(g["key"] for g in manifest["groups"] if name in g["names"])


def _chunk_of(manifest: Manifest, name: str) -> str:
    return next(g["buffers"][0]["chunks"][-1] for g in manifest["groups"] if name in g["names"])


def _random_states(manifest: Manifest, name: str) -> str:
    return manifest["random"]["key"]


@pytest.mark.parametrize("blob", [_stream_of, _chunk_of, _random_states], ids=["stream", "chunk", "random-states"])
def test_a_tampered_blob_refuses_the_restore_and_changes_nothing(store: Store, blob: Any) -> None:
    module = notebook("import numpy as np\ntable = np.random.default_rng(0).random(200_000)\nsmall = [1]")
    cid, manifest = save(store, module)
    _flip_last_byte(store, blob(manifest, "table"))
    module.__dict__.update(small=[2], late=1)
    before = dict(module.__dict__)
    state = random.getstate()
    with pytest.raises(IntegrityError, match="fails its signature check"):
        restore_namespace(store.blobs, module, cid, manifest)
    assert module.__dict__ == before and all(module.__dict__[n] is v for n, v in before.items())
    assert random.getstate() == state


def test_a_missing_blob_refuses_the_restore(store: Store) -> None:
    module = notebook("small = [1]")
    cid, manifest = save(store, module)
    store.blobs.delete(_stream_of(manifest, "small"))
    module.__dict__["small"] = [2]
    with pytest.raises(IntegrityError, match="missing"):
        restore_namespace(store.blobs, module, cid, manifest)
    assert module.__dict__["small"] == [2]


def test_held_variables_are_kept_or_patched_in_place_and_rebound_ones_are_read(store: Store) -> None:
    module = notebook(
        """
        import numpy as np
        table = np.random.default_rng(0).random((1_000, 1_000))
        untouched = np.arange(100_000.0)
        rebound = [1, 2]
        """
    )
    ns = module.__dict__
    captured = collect(ns, (), ())
    cid, manifest = save(store, module)
    table = ns["table"]
    table[500, :] = -1.0
    ns["rebound"] = [1, 2]  # equal content, another object
    report = restore_namespace(store.blobs, module, cid, manifest, held=captured.ids)
    assert report.patched == ["table"] and report.kept == ["untouched"] and report.loaded == ["rebound"]
    assert ns["table"] is table and np.array_equal(table, np.random.default_rng(0).random((1_000, 1_000)))


def test_a_lazy_restore_maps_large_raw_arrays_and_lists_their_chunks_as_unverified(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    module_under_test = sys.modules[restore_namespace.__module__]  # the package exports a function of that name
    monkeypatch.setattr(
        module_under_test, "LAZY_MIN", 1 << 20
    )  # the threshold, lowered so that a small array is "large"
    values = np.random.default_rng(0).random(600_000)  # 4.6 MB: a raw chunk and a second one
    module = notebook("")
    module.__dict__.update(table=values.copy(), words=["a"] * 10)
    cid, manifest = save(store, module)
    fresh = types.ModuleType("__main__")
    report = restore_namespace(store.blobs, fresh, cid, manifest, lazy=True)
    chunks = manifest["groups"][[g["names"] for g in manifest["groups"]].index(["table"])]["buffers"][0]["chunks"]
    assert report.unverified == {key: ["table"] for key in chunks} and report.lazy_names() == ["table"]
    table = fresh.__dict__["table"]
    assert np.array_equal(table, values) and fresh.__dict__["words"] == ["a"] * 10
    table[:] = 0.0  # the mapping is private: the chunk files keep the checkpoint's bytes
    assert b"".join(bytes(store.blobs.read(key)) for key in chunks) == values.tobytes()
    again = types.ModuleType("__main__")
    restore_namespace(store.blobs, again, cid, manifest)
    assert np.array_equal(again.__dict__["table"], values)


def test_code_that_runs_while_unpickling_finds_the_globals_of_the_checkpoint(store: Store) -> None:
    """A class that rebuilds what cannot be pickled (a lock, a compiled pattern) in ``__setstate__``, or that
    pickles as a call to a notebook function, runs notebook code while it is read. In a new kernel (after a
    crash, the next morning) that code must find the modules and variables it uses."""
    module = notebook(
        """
        import re as regex
        import threading
        SEPARATOR = ","
        class Tokenizer:
            def __init__(self):
                self.pattern = regex.compile(SEPARATOR)
                self.lock = threading.Lock()
            def __getstate__(self):
                return {}
            def __setstate__(self, state):
                self.__init__()
        def make_counter(start):
            return {"count": start, "step": SEPARATOR}
        class Counter:
            def __reduce__(self):
                return (make_counter, (3,))
        tokens = Tokenizer()
        counter = Counter()
        """
    )
    cid, manifest = save(store, module)
    fresh = types.ModuleType("__main__")
    report = restore_namespace(store.blobs, fresh, cid, manifest)
    assert report.not_restored == {}
    ns = fresh.__dict__
    assert ns["tokens"].pattern.split("a,b") == ["a", "b"] and ns["tokens"].lock.acquire(blocking=False)
    assert ns["counter"] == {"count": 3, "step": ","}
    # A restore refused once every variable was read (the random states, read last, are tampered with) leaves
    # the namespace as it was: what the unpickling code saw is gone again.
    _flip_last_byte(store, manifest["random"]["key"])
    fresh = types.ModuleType("__main__")
    with pytest.raises(IntegrityError, match="fails its signature check"):
        restore_namespace(store.blobs, fresh, cid, manifest)
    assert user_names(fresh) == []


@pytest.mark.parametrize("obj, sep", [("b_tok", "a_sep"), ("a_tok", "b_sep")])
def test_code_run_while_loading_never_sees_the_live_value_of_a_variable_read_later(
    store: Store, obj: str, sep: str
) -> None:
    """An undo after both were rebound: the object's ``__setstate__`` reads the other variable, and must find the
    checkpoint's value, whichever group is read first (both orders of names are tried)."""
    module = notebook(
        f"{sep} = ','\n"
        "class z_tokenizer:\n"
        "    def __getstate__(self):\n"
        "        return {}\n"
        "    def __setstate__(self, state):\n"
        f"        self.sep = {sep}\n"
        f"{obj} = z_tokenizer()\n"
        f"{obj}.__setstate__({{}})\n"
    )
    cid, manifest = save(store, module)
    assert len(manifest["groups"]) == 2  # the class with its object, and the separator
    module.__dict__.update({obj: None, sep: None})
    report = restore_namespace(store.blobs, module, cid, manifest, held={})
    assert report.not_restored == {}
    assert (getattr(module, obj).sep, getattr(module, sep)) == (",", ",")


def test_a_large_array_read_in_full_is_held_in_huge_pages_as_numpy_held_it(store: Store) -> None:
    """numpy asks for huge pages for arrays from 4 MiB; a restore that reads one gives it the same, so that
    filling it takes a page fault per 2 MiB, not per 4 KiB, and it forks as the array its cell made did."""
    libc().malloc_trim(0)  # memory earlier tests freed goes back, so the array's pages are new ones
    module = types.ModuleType("__main__")
    module.__dict__["table"] = np.random.default_rng(0).random(TABLE // 8)
    if huge_bytes(module.__dict__["table"]) < TABLE // 2:
        pytest.skip("this machine gives numpy's arrays no huge pages")
    ckpt = Checkpointer(store, "nb.ipynb", module)
    ckpt.save()
    fresh = types.ModuleType("__main__")
    Checkpointer(store, "nb.ipynb", fresh, lazy=False).restore()
    assert np.array_equal(fresh.__dict__["table"], module.__dict__["table"])
    assert huge_bytes(fresh.__dict__["table"]) >= TABLE // 2


def test_replay_takes_what_its_cells_made_on_a_rebuilt_variable_s_objects_unless_a_later_cell_uses_it() -> None:
    """``index`` holds the list ``box`` holds, and ``by_name`` holds ``index``; ``box`` is missing and rebuilt, the
    restored ``index`` holds a copy of the old list. Taken from the replay, with ``by_name``, it holds the rebuilt
    one's; used by a cell replay does not run, it is kept as restored and the report says they no longer share it."""
    made = "box = {'items': [1]}\nindex = {'of_box': box['items']}\nby_name = {'index': index}"
    history = [{"count": 1, "source": made, "status": "ok"}]
    namespace: dict[str, Any] = {"index": {"of_box": [1]}}
    namespace["by_name"] = {"index": namespace["index"]}
    outcome = run_recipe(plan(["box"], history), namespace, exec_cell)
    taken = "replayed with box (they share objects)"
    assert outcome == {"box": "replayed", "by_name": taken, "index": taken}
    index = namespace["index"]
    assert index["of_box"] is namespace["box"]["items"] and namespace["by_name"]["index"] is index

    history.append({"count": 2, "source": "index['seen'] = True", "status": "ok"})
    namespace = {"index": {"of_box": [1], "seen": True}, "by_name": {}}
    restored = namespace["index"]
    outcome = run_recipe(plan(["box"], history), namespace, exec_cell)
    assert namespace["index"] is restored and outcome["index"] == (
        "kept as restored, no longer sharing objects with box: cell [2] uses it after the cells replay ran"
    )


def test_a_notebook_class_whose_instance_cannot_be_saved_stays_the_class_of_that_instance(kernels: Any) -> None:
    """The writer that tried to pickle ``feed`` cached ``__slotnames__`` on its copy of ``Feed``, the kernel's has
    none: the restore found the live class changed, read it again, and ``feed``, kept as it was, was no longer
    an instance of the ``Feed`` in the namespace."""
    k = kernels("kept_instance.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto off")
    k.ok("class Feed:\n    def __init__(self):\n        self.rows = (i for i in range(5))\nfeed = Feed()")
    k.ok("%checkpoint save -t before")
    k.ok("x = 1")
    k.ok("%checkpoint save")
    out = k.ok("%checkpoint restore before")
    assert k.value("type(feed) is Feed and isinstance(feed, Feed)") is True
    assert "1 unchanged" in out and "feed (Feed could not be serialized" in out


def test_what_replay_rebuilds_is_an_instance_of_the_restored_class_its_cell_defined_again() -> None:
    """The cell that made ``box`` (a generator in it: skipped) defined ``Box``, which the restore brought back; run
    again, it defines another ``Box``: ``box`` and what it holds are made instances of the restored one."""
    classes = "class Box:\n    pass\nclass Slim:\n    __slots__ = ('rows',)\n"
    made = classes + "box = Box()\nbox.inner = [Slim()]\nbox.inner[0].rows = (i for i in range(2))"
    namespace: dict[str, Any] = {}
    exec_cell(classes, namespace)
    restored = namespace["Box"], namespace["Slim"]
    history = [{"count": 1, "source": made, "status": "ok"}]
    assert run_recipe(plan(["box"], history), namespace, exec_cell) == {"box": "replayed"}
    assert (namespace["Box"], namespace["Slim"]) == restored and type(namespace["box"]) is restored[0]
    assert type(namespace["box"].inner[0]) is restored[1] and list(namespace["box"].inner[0].rows) == [0, 1]


def test_a_colormap_the_notebook_registered_with_matplotlib_is_registered_again(store: Store) -> None:
    """``matplotlib.colormaps.register(cmap)`` then ``imshow(x, cmap="ramp")``: a fresh kernel's matplotlib has only its
    own colormaps, and ``cmap="ramp"`` raised ValueError after a restore."""
    import matplotlib

    module = types.ModuleType("__main__")
    exec(
        "import matplotlib, matplotlib.colors as mcolors\n"
        "ramp = mcolors.LinearSegmentedColormap.from_list('test_ramp', ['red', 'blue'])\n"
        "matplotlib.colormaps.register(ramp)\n",
        module.__dict__,
    )
    try:
        Checkpointer(store, "colormap.ipynb", module).save()
        matplotlib.colormaps.unregister("test_ramp")  # as a new kernel's matplotlib has it
        fresh = types.ModuleType("__main__")
        assert Checkpointer(store, "colormap.ipynb", fresh).restore("latest").not_restored == {}
        assert matplotlib.colormaps["test_ramp"] == fresh.__dict__["ramp"]
    finally:
        if "test_ramp" in matplotlib.colormaps:
            matplotlib.colormaps.unregister("test_ramp")


def test_a_sympy_function_restored_in_its_kernel_makes_expressions_of_itself(store: Store) -> None:
    """sympy caches each expression it makes under an equal key: after an undo in the kernel, ``f(x)`` (and the
    expressions read back) were the cached ones of the ``f`` the restore replaced, so ``f(x).func is f`` was False."""
    module = types.ModuleType("__main__")
    exec(
        "import sympy as sp\nx = sp.Symbol('x')\nf = sp.Function('f')\ne = f(x) + 1\n",
        module.__dict__,
    )
    ckpt = Checkpointer(store, "symbols.ipynb", module)
    cid = ckpt.save()
    exec("del f, e", module.__dict__)
    ckpt.restore(cid)
    f, x, e = (module.__dict__[n] for n in ("f", "x", "e"))
    assert (f(x).func is f, e.args[1].func is f, e.atoms(f) == {f(x)}) == (True, True, True)


def test_context_variables_and_thread_locals_come_back_as_the_cells_saw_them_from_an_idle_checkpoint(
    kernels: Any, store: Store
) -> None:
    """A ``ContextVar`` with its value set by a cell, and a ``threading.local`` with attributes the cells gave it:
    pickle refuses both, and a restore named them and offered to run their cells again. Now they come back with
    what the cells saw, also from the checkpoint the kernel takes when it goes idle, which another thread takes:
    read there, the variable had only its default and the thread-local object no attributes."""
    k = kernels("context.ipynb")
    k.ok("%load_ext jupyter_ckpt")
    k.ok(
        "import contextvars, threading\nuser = contextvars.ContextVar('user', default='anon')\nuser.set(['ann'])\n"
        "plain = contextvars.ContextVar('plain')\nlocal = threading.local()\nlocal.rows = user.get()\n"
        "class State(threading.local):\n    def __init__(self):\n        self.items = []\nstate = State()\n"
        "state.items.append(1)\nclass Pool:\n    def __init__(self):\n        self.mine = threading.local()\n"
        "        self.mine.conn = 'c1'\npool = Pool()"
    )
    deadline = time.time() + 60
    while not any(r.trigger == "cell" and r.cell == 2 for r in store.checkpoints("context.ipynb")):
        assert time.time() < deadline, "no checkpoint of the idle kernel"
        time.sleep(0.2)
    k.close()

    fresh = kernels("context.ipynb")
    fresh.ok("%load_ext jupyter_ckpt")
    out = fresh.ok("%checkpoint restore latest")
    assert "not restored" not in out, out
    shown = fresh.value(
        "(user.get(), user.get() is local.rows, plain.get('none'), local.rows, state.items, type(state) is State,"
        " contextvars.Context().run(user.get))"
    )
    assert shown == (["ann"], True, "none", ["ann"], [1], True, "anon")
    assert fresh.value("pool.mine.conn") == "c1"  # one an object of the notebook holds
    assert fresh.value("user.get()") == ["ann"]  # in the cells after the restore too


def test_variables_written_apart_because_they_could_not_be_written_together_are_named(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Variables that share an object are written as one group. Where no pickler could write the group whole but
    each could write every variable of it alone (dill's memo failed on a second empty array, 'AssertionError:'),
    they were written one by one, and came back each with its own copy of what they shared, with nothing said."""
    from jupyter_ckpt import serialize

    module = notebook("shared = [1]\nfirst = {'rows': shared}\nsecond = [shared]\nother = 5")
    dump = serialize._dump

    def only_alone(serializer: str, objs: dict[str, Any], module: types.ModuleType) -> Any:
        if len(objs) > 1 and "shared" in objs:  # a pickler's fault that only this group meets
            raise RuntimeError("a fault of the pickler")
        return dump(serializer, objs, module)

    monkeypatch.setattr(serialize, "_dump", only_alone)
    cid, manifest = save(store, module)
    monkeypatch.undo()
    fresh = notebook("")
    report = restore_namespace(store.blobs, fresh, cid, manifest)
    assert fresh.first["rows"] == [1] and fresh.first["rows"] is not fresh.shared  # as written, apart
    assert sorted(report.apart) == ["first", "second", "shared"] and "other" not in report.apart
    assert (
        "\n  restored apart: first (it shared objects with second, shared, which could not be written together"
        " (RuntimeError: a fault of the pickler): each has its own copy of them now)"
    ) in report.summary()

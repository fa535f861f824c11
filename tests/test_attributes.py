"""Which attributes of modules and imported classes a checkpoint keeps: those the cells' own statements change."""

from __future__ import annotations

import fractions
import importlib
import statistics
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from jupyter_ckpt import attributes, serialize
from jupyter_ckpt.attributes import IN_PLACE, SET
from jupyter_ckpt.checkpointer import Checkpointer


def test_the_attributes_a_cell_changes_are_kept_once_each_as_typed_with_how() -> None:
    cell = (
        "%matplotlib inline\n"  # IPython's lines do not keep the rest from being read
        "cfg.DEBUG = True\n"
        "cfg.limits.upper += 1\n"
        "cfg.A, (cfg.B, other) = 1, (2, 3)\n"
        "pd.DataFrame.doubled: object = lambda self: self * 2\n"
        "setattr(cfg, 'SEED', 7)\n"
        "if ready:\n    for _ in range(2):\n        cfg.DEBUG = False\n"
        "cfg.PARAMS['lr'] = 0.1\n"
        "cfg.PARAMS['layers'][0] += 1\n"
        "del cfg.CACHE['old']\n"
        "cfg.ITEMS.append(1)\n"
        "cfg.A.update(x=1)\n"  # assigned before, in this cell: still set again as assigned
    )
    assert attributes.merged({"cfg.SEED": SET, "cfg.DEBUG": IN_PLACE}, cell) == {
        "cfg.SEED": SET,
        "cfg.DEBUG": SET,
        "cfg.limits.upper": SET,
        "cfg.A": SET,
        "cfg.B": SET,
        "pd.DataFrame.doubled": SET,
        "cfg.PARAMS": IN_PLACE,
        "cfg.CACHE": IN_PLACE,
        "cfg.ITEMS": IN_PLACE,
    }


def test_what_is_not_a_change_the_cell_makes_to_an_attribute_is_not_kept() -> None:
    cells = [
        "rows[0].name = 'x'\nmake().value = 1\nframe['a'] = 1\nx = cfg.DEBUG\ncfg.DEBUG == True\nprint(cfg.ITEMS[0])",
        "def setup():\n    cfg.DEBUG = True\nclass Box:\n    size = 1\n    def grow(self):\n        self.size = 2",
        "setattr(cfg, name, 1)\nsetattr(cfg, 'not a name', 1)\ndel cfg.DEBUG\ncfg.ITEMS.count(1)\nitems.append(1)",
        "%%bash\ncfg.DEBUG = 1",  # a cell magic's body is not Python
        "cfg.DEBUG = (",  # does not parse
    ]
    assert [attributes.merged({}, cell) for cell in cells] == [{}, {}, {}, {}, {}]


def test_values_are_read_where_a_module_or_an_imported_class_holds_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = types.ModuleType("config")
    config.__file__ = str(tmp_path / "config.py")  # the project's own module, imported
    monkeypatch.setitem(sys.modules, "config", config)
    config.DEBUG = True  # type: ignore[attr-defined]
    config.nested = types.SimpleNamespace(level=3)  # type: ignore[attr-defined]
    config.np = types  # type: ignore[attr-defined]
    config.PARAMS = {"lr": 0.1}  # type: ignore[attr-defined]

    class Local:  # a notebook class: pickled by value, its attributes with it
        size = 1

    namespace = {
        "cfg": config,
        "Fraction": fractions.Fraction,
        "Local": Local,
        "box": Local(),
        "sys": sys,
        "__name__": __name__,
    }
    fractions.Fraction.test_half = 0.5  # type: ignore[attr-defined]
    try:
        kept = {
            **dict.fromkeys(["cfg.DEBUG", "cfg.nested.level", "cfg.np", "cfg.gone", "Fraction.test_half"], SET),
            **dict.fromkeys(["Local.size", "box.size", "missing.x"], SET),
            **dict.fromkeys(["cfg.PARAMS", "cfg.DEBUG.x", "sys.path"], IN_PLACE),
        }
        values = attributes.read(namespace, kept, __name__)
    finally:
        del fractions.Fraction.test_half  # type: ignore[attr-defined]
    assert values == {
        "cfg.DEBUG": True,
        "cfg.nested.level": 3,  # a module set as a value is not kept: importing gives it
        "Fraction.test_half": 0.5,
        "cfg.PARAMS": {"lr": 0.1},  # a copy of a project module's container; never the standard library's
    }
    assert values["cfg.PARAMS"] is not config.PARAMS  # type: ignore[attr-defined]
    assert attributes.places(namespace, kept) == [("config", "DEBUG"), ("config", "np"), ("config", "gone")]


def test_a_restore_sets_each_value_again_and_names_those_it_cannot() -> None:
    def mine(xs: object) -> str:
        return "mine"

    original = statistics.mean
    config = types.ModuleType("config")
    config.PARAMS = params = {"lr": 0.1, "old": 1}  # type: ignore[attr-defined]
    config.ITEMS = items = [1]  # type: ignore[attr-defined]
    config.tags = "was a set"  # type: ignore[attr-defined]
    namespace = {"statistics": statistics, "cfg": config, "int": int}
    values = {
        "statistics.mean": mine,
        "cfg.LIMIT": 99,
        "cfg.PARAMS": {"lr": 0.5},
        "cfg.ITEMS": [1, 2],
        "cfg.tags": {"a"},
        "int.real": 1,
        "gone.x": 1,
        "cfg.missing.x": 1,
    }
    how = {**dict.fromkeys(values, SET), **dict.fromkeys(["cfg.PARAMS", "cfg.ITEMS", "cfg.tags"], IN_PLACE)}
    try:
        failed = attributes.apply(namespace, values, how)
        assert statistics.mean is mine and config.LIMIT == 99  # type: ignore[attr-defined]
    finally:
        statistics.mean = original
    # Changed in place: the very objects the module holds, with the contents kept; else set.
    assert config.PARAMS is params and params == {"lr": 0.5}  # type: ignore[attr-defined]
    assert config.ITEMS is items and items == [1, 2]  # type: ignore[attr-defined]
    assert config.tags == {"a"}  # type: ignore[attr-defined]
    assert sorted(failed) == ["cfg.missing.x", "gone.x", "int.real"]
    assert failed["gone.x"] == "not set again: KeyError: 'gone'"


def test_variables_bound_to_a_project_module_s_containers_are_bound_to_them_again(tmp_path: Path) -> None:
    project = types.ModuleType("alias_project")
    project.__file__ = str(tmp_path / "alias_project.py")
    project.PARAMS = params = {"lr": 0.1}  # type: ignore[attr-defined]
    project.SEEN = []  # type: ignore[attr-defined]
    sys.modules["alias_project"] = project
    try:
        variables = {"PARAMS": params, "own": {"lr": 0.1}, "path": sys.path, "SEEN": project.SEEN}  # type: ignore[attr-defined]
        assert attributes.aliases(variables) == {"PARAMS": "alias_project:PARAMS", "SEEN": "alias_project:SEEN"}

        project.SEEN = "a list no more"  # type: ignore[attr-defined]
        namespace: dict[str, object] = {}
        restored = {"PARAMS": {"lr": 0.5}, "SEEN": ["run"]}
        failed = attributes.rebind(
            namespace, {"PARAMS": "alias_project:PARAMS", "SEEN": "alias_project:SEEN"}, restored
        )
    finally:
        del sys.modules["alias_project"]
    assert namespace == {"PARAMS": {"lr": 0.5}} and namespace["PARAMS"] is params  # the module's own dict
    assert failed == {
        "SEEN": "restored as a copy, not alias_project:SEEN itself: TypeError: alias_project:SEEN is a str now"
    }


def test_what_cells_change_of_an_object_a_project_module_holds_comes_back_on_that_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: Any
) -> None:
    """``from config import settings`` then ``settings.lr = 0.5``: ``settings`` is saved as the module's, and came
    back as the module makes it (``lr`` 0.1, no tags), the cells' changes lost."""
    (tmp_path / "projcfg.py").write_text(
        "class Settings:\n    def __init__(self):\n        self.lr = 0.1\n        self.tags = []\n"
        "settings = Settings()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    serialize.index_library()  # counted before the import: the index takes in the module as a kernel's does
    module = types.ModuleType("__main__")
    ckpt = Checkpointer(store, "project.ipynb", module)
    for count, source in enumerate(["from projcfg import settings", "settings.lr = 0.5\nsettings.tags.append('x')"], 1):
        exec(source, module.__dict__)
        ckpt.record_cell(count, source, True, 0.0)
    ckpt.save()
    try:
        importlib.reload(sys.modules["projcfg"])  # as a new kernel imports it
        fresh = types.ModuleType("__main__")
        report = Checkpointer(store, "project.ipynb", fresh).restore("latest")
        settings = fresh.__dict__["settings"]
        assert report.not_restored == {} and settings is sys.modules["projcfg"].settings
        assert (settings.lr, settings.tags) == (0.5, ["x"])
    finally:
        del sys.modules["projcfg"]

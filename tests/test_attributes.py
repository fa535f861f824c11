"""Which attributes of modules and imported classes a checkpoint keeps: those the cells' own code assigns."""

from __future__ import annotations

import fractions
import statistics
import types

from jupyter_ckpt import attributes


def test_the_attributes_a_cell_assigns_are_kept_once_each_as_typed() -> None:
    cell = (
        "%matplotlib inline\n"  # IPython's lines do not keep the rest from being read
        "cfg.DEBUG = True\n"
        "cfg.limits.upper += 1\n"
        "cfg.A, (cfg.B, other) = 1, (2, 3)\n"
        "pd.DataFrame.doubled: object = lambda self: self * 2\n"
        "setattr(cfg, 'SEED', 7)\n"
        "if ready:\n    for _ in range(2):\n        cfg.DEBUG = False\n"
    )
    assert attributes.merged(["cfg.SEED"], cell) == [
        "cfg.SEED",
        "cfg.DEBUG",
        "cfg.limits.upper",
        "cfg.A",
        "cfg.B",
        "pd.DataFrame.doubled",
    ]


def test_what_is_not_an_attribute_the_cell_assigns_is_not_kept() -> None:
    cells = [
        "rows[0].name = 'x'\nmake().value = 1\nframe['a'] = 1\nx = cfg.DEBUG\ncfg.DEBUG == True",
        "def setup():\n    cfg.DEBUG = True\nclass Box:\n    size = 1\n    def grow(self):\n        self.size = 2",
        "setattr(cfg, name, 1)\nsetattr(cfg, 'not a name', 1)\ndel cfg.DEBUG",
        "%%bash\ncfg.DEBUG = 1",  # a cell magic's body is not Python
        "cfg.DEBUG = (",  # does not parse
    ]
    assert [attributes.merged([], cell) for cell in cells] == [[], [], [], [], []]


def test_values_are_read_where_a_module_or_an_imported_class_holds_them() -> None:
    config = types.ModuleType("config")
    config.DEBUG = True  # type: ignore[attr-defined]
    config.nested = types.SimpleNamespace(level=3)  # type: ignore[attr-defined]
    config.np = types  # type: ignore[attr-defined]

    class Local:  # a notebook class: pickled by value, its attributes with it
        size = 1

    namespace = {"cfg": config, "Fraction": fractions.Fraction, "Local": Local, "box": Local(), "__name__": __name__}
    fractions.Fraction.test_half = 0.5  # type: ignore[attr-defined]
    try:
        names = ["cfg.DEBUG", "cfg.nested.level", "cfg.np", "cfg.gone", "Fraction.test_half", "Local.size", "box.size"]
        assert attributes.read(namespace, [*names, "missing.x"], __name__) == {
            "cfg.DEBUG": True,
            "cfg.nested.level": 3,  # a module set as a value is not kept: importing gives it
            "Fraction.test_half": 0.5,
        }
    finally:
        del fractions.Fraction.test_half  # type: ignore[attr-defined]


def test_a_restore_sets_each_value_again_and_names_those_it_cannot() -> None:
    def mine(xs: object) -> str:
        return "mine"

    original = statistics.mean
    config = types.ModuleType("config")
    namespace = {"statistics": statistics, "cfg": config, "int": int}
    try:
        failed = attributes.apply(
            namespace,
            {"statistics.mean": mine, "cfg.LIMIT": 99, "int.real": 1, "gone.x": 1, "cfg.missing.x": 1},
        )
        assert statistics.mean is mine and config.LIMIT == 99  # type: ignore[attr-defined]
    finally:
        statistics.mean = original
    assert sorted(failed) == ["cfg.missing.x", "gone.x", "int.real"]
    assert failed["gone.x"] == "not set again: KeyError: 'gone'"

"""Settings the cells changed (matplotlib's rcParams, pandas' options, numpy's print options) come back with
a restore: into a fresh kernel, and on an undo, which puts the earlier ones back."""

from __future__ import annotations

import subprocess
import sys
import time
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

from jupyter_ckpt import capture, settings
from jupyter_ckpt.capture import Meta, collect, link, prepare
from jupyter_ckpt.restore import restore_namespace
from jupyter_ckpt.store import Store
from jupyter_ckpt.timeline import Timeline

# What the cells set, as the user looks at it.
LOOK = (
    "(mpl.rcParams['font.size'], mpl.rcParams['lines.linewidth'], mpl.rcParams['axes.facecolor'], "
    "mpl.colors.to_hex(mpl.rcParams['axes.prop_cycle'].by_key()['color'][0]).upper())"
)
SHOW = "(pd.get_option('display.max_rows'), repr(s), repr(np.array([1.23456])), np.geterr()['divide'])"


def test_plot_settings_come_back_in_a_fresh_kernel_and_an_undo_puts_the_earlier_ones_back(kernels: Any) -> None:
    k = kernels("plots.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")
    k.ok("import matplotlib as mpl\nimport matplotlib.pyplot as plt\nx = 1")
    backend, defaults = k.value("mpl.get_backend()"), k.value(LOOK)
    assert defaults == (10.0, 1.5, "white", "#1F77B4")
    k.ok("%checkpoint wait")  # each of these cells has a checkpoint of its own (a busy writer coalesces them)
    k.ok('plt.style.use("ggplot")')
    k.ok("%checkpoint wait")
    k.ok('plt.rc("font", size=14)\nplt.rc("lines", linewidth=3)')
    styled = k.value(LOOK)
    assert styled == (14.0, 3.0, "#E5E5E5", "#E24A33")
    k.ok("%checkpoint save -t styled")
    # The timeline shows that a cell changed settings, as it shows the variables it changed.
    assert "matplotlib rcParams" in k.ok("%checkpoint list --all")

    k.ok("%checkpoint undo")  # the cell before the rc changes: ggplot's look stays, the sizes go
    assert k.value(LOOK) == (10.0, 1.5, "#E5E5E5", "#E24A33")
    k.ok("%checkpoint undo")  # the cell before the style: the defaults, and x (a cell before it) kept
    assert k.value(LOOK) == defaults and k.value("x") == 1
    k.kill()

    fresh = kernels("plots.ipynb")
    fresh.ok("%load_ext jupyter_ckpt")
    out = fresh.ok("%checkpoint restore styled")
    assert "not restored" not in out
    assert fresh.value(LOOK) == styled
    assert fresh.value("mpl.get_backend()") == backend  # the backend is the kernel's, never the checkpoint's
    fresh.ok("fig, ax = plt.subplots()\nax.plot([1, 2])\nfig.canvas.draw()")


def test_the_settings_of_a_library_the_new_kernel_has_not_imported_import_it(kernels: Any) -> None:
    k = kernels("helper.ipynb")
    k.ok("%load_ext jupyter_ckpt")
    k.ok("import matplotlib\nmatplotlib.rcParams['lines.linewidth'] = 4\ndel matplotlib")  # imported, not bound
    k.ok("%checkpoint save -t thick")
    k.kill()
    fresh = kernels("helper.ipynb")
    fresh.ok("%load_ext jupyter_ckpt")
    assert fresh.value("'matplotlib' in __import__('sys').modules") is False
    fresh.ok("%checkpoint restore thick")
    assert fresh.value("__import__('sys').modules['matplotlib'].rcParams['lines.linewidth']") == 4.0


def test_table_and_array_display_settings_come_back_in_a_fresh_kernel_and_on_undo(kernels: Any) -> None:
    k = kernels("tables.ipynb")
    k.ok("%load_ext jupyter_ckpt")  # the default policy: the idle thread checkpoints a cell followed by idle
    k.ok("import numpy as np\nimport pandas as pd\ns = pd.Series([1.23456, 2.5])")
    defaults = k.value(SHOW)
    k.ok("%checkpoint wait")  # this state has a checkpoint of its own, for the undo below
    k.ok(
        "pd.set_option('display.max_rows', 7)\npd.options.display.float_format = '{:.1f}'.format\n"
        "np.set_printoptions(precision=2)\nnp.seterr(divide='ignore')"
    )
    shown = k.value(SHOW)
    assert shown == (7, "0   1.2\n1   2.5\ndtype: float64", "array([1.23])", "ignore") != defaults
    time.sleep(0.8)  # idle: the idle thread checkpoints the cell, and sees numpy's options only as noted
    k.ok("%checkpoint wait")
    k.kill()

    fresh = kernels("tables.ipynb")
    fresh.ok("%load_ext jupyter_ckpt")
    out = fresh.ok("%checkpoint restore latest")
    assert "not restored" not in out
    assert fresh.value(SHOW) == shown  # numpy's too: they live in a context variable the idle thread cannot see
    fresh.ok("%checkpoint undo")
    assert fresh.value(SHOW) == defaults


def test_a_setting_this_version_does_not_have_is_reported_and_the_others_are_applied(kernels: Any) -> None:
    k = kernels("extension.ipynb")
    k.ok("%load_ext jupyter_ckpt")
    # An extension registers an option of its own, as plotting backends do; the next kernel does not load it.
    k.ok(
        "import pandas as pd\nfrom pandas._config import config\n"
        "config.register_option('display.sparkles', False)\n"
        "pd.set_option('display.sparkles', True)\npd.set_option('display.max_rows', 9)"
    )
    k.ok("%checkpoint save -t sparkly")
    k.kill()
    fresh = kernels("extension.ipynb")
    fresh.ok("%load_ext jupyter_ckpt")
    out = fresh.ok("%checkpoint restore sparkly")
    assert "not restored: pandas option 'display.sparkles' (not applied (KeyError: " in out
    assert "has no such option" in out and "left as it was)" in out
    assert fresh.value("pd.get_option('display.max_rows')") == 9


# -- in this process -----------------------------------------------------------------------------


@pytest.fixture
def defaults() -> Iterator[None]:
    """Tests here change this process's settings: each library's starting values again after each."""
    yield
    settings.apply({}, sys.modules["__main__"])


def test_settings_are_read_only_of_libraries_already_imported() -> None:
    code = (
        "import sys, jupyter_ckpt.settings as s\nprint(s.read(), sorted({'pandas', 'matplotlib'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "{} []"


def test_only_what_differs_from_the_start_is_kept_and_a_setting_not_plain_data_is_kept_on_its_own(
    defaults: None,
) -> None:
    assert "pandas" not in settings.read()
    pd.set_option("display.max_rows", 11)
    pd.options.display.float_format = "{:.3f}".format
    kept = settings.read()["pandas"]
    assert kept["display.max_rows"] == 11 and isinstance(kept["display.float_format"], settings.Opaque)
    assert list(kept) == ["display.float_format", "display.max_rows"]


def test_how_the_session_computes_is_kept_and_put_back(defaults: None) -> None:
    import decimal

    import sklearn
    import torch

    torch.set_default_dtype(torch.float64)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_grad_enabled(False)  # an inference notebook's first cell
    torch.autograd.set_detect_anomaly(True)
    torch.backends.cudnn.benchmark = True
    sklearn.set_config(transform_output="pandas")
    decimal.getcontext().prec = 6
    decimal.getcontext().traps[decimal.Inexact] = True
    sys.setrecursionlimit(4321)
    sys.set_int_max_str_digits(0)
    kept = settings.read()
    assert {name: kept[name] for name in ("torch", "scikit-learn", "decimal", "python")} == {
        "torch": {
            "cudnn_benchmark": True,
            "default_dtype": "float64",
            "detect_anomaly": True,
            "deterministic_algorithms": "warn only",
            "grad_enabled": False,
        },
        "scikit-learn": {"transform_output": "pandas"},
        "decimal": {"prec": 6, "traps": ["DivisionByZero", "Inexact", "InvalidOperation", "Overflow"]},
        "python": {"int_max_str_digits": 0, "recursionlimit": 4321},
    }

    assert settings.apply({}, sys.modules["__main__"]) == {}  # an undo to before those cells
    assert torch.get_default_dtype() is torch.float32 and not torch.are_deterministic_algorithms_enabled()
    assert torch.is_grad_enabled() and not torch.is_anomaly_enabled() and not torch.backends.cudnn.benchmark
    assert sklearn.get_config()["transform_output"] == "default" and sys.getrecursionlimit() == 1000
    assert str(decimal.Decimal(1) / 7) == "0.1428571428571428571428571429"

    assert settings.apply(kept, sys.modules["__main__"]) == {}  # and back
    assert torch.zeros(1).dtype is torch.float64 and torch.is_deterministic_algorithms_warn_only_enabled()
    assert not torch.ones(1, requires_grad=True).mul(2).requires_grad and torch.is_anomaly_enabled()
    assert sklearn.get_config()["transform_output"] == "pandas" and sys.get_int_max_str_digits() == 0
    with pytest.raises(decimal.Inexact):
        decimal.Decimal(1) / 7
    assert sys.getrecursionlimit() == 4321 and settings.read() == kept


def test_a_record_from_elsewhere_applies_what_it_can_and_names_the_rest(defaults: None) -> None:
    record: settings.Settings = {
        "pandas": {"display.max_rows": 9, "display.nope": 1},
        "numpy print": {"precision": 2, "floatmode": "bogus"},
        "numpy errors": {"over": "ignore"},
        "polars": {"fmt_str_lengths": 50},  # kept by a later jupyter-ckpt
    }
    failed = settings.apply(record, sys.modules["__main__"])
    assert sorted(failed) == ["numpy print option 'floatmode'", "pandas option 'display.nope'", "polars settings"]
    assert "this version of jupyter-ckpt does not keep them" in failed["polars settings"]
    assert pd.get_option("display.max_rows") == 9 and np.get_printoptions()["precision"] == 2
    assert np.geterr()["over"] == "ignore"
    assert settings.apply(["not", "a", "record"], sys.modules["__main__"]) == {  # type: ignore[arg-type]
        "settings": "not applied: a list, not a record of settings"
    }


def _save(store: Store, module: types.ModuleType, parent: int | None = None) -> int:
    meta = Meta(session="nb.ipynb", cell=1, last_cell=None, trigger="manual", status="ok", at=1_000.0)
    manifest, blobs = prepare(store.blobs, module, collect(module.__dict__, (), ()), meta)
    linked = link(manifest, parent, store.manifest(parent) if parent is not None else None)
    return store.commit("nb.ipynb", linked, blobs)


def test_a_checkpoint_that_only_changed_a_setting_changed_the_state(store: Store, defaults: None) -> None:
    module = types.ModuleType("__main__")
    module.__dict__["x"] = 1
    first = _save(store, module)
    pd.set_option("display.max_rows", 5)
    second = _save(store, module, first)
    assert store.manifest(second)["changed"] == ["pandas options"]
    assert (
        Timeline(store).resolve("nb.ipynb", "-1", head=second).id == first
    )  # an undo goes to the cell before the change
    report = restore_namespace(store.blobs, module, first, store.manifest(first))
    assert pd.get_option("display.max_rows") == 60 and report.not_restored == {}


def test_a_checkpoint_older_than_settings_leaves_the_live_ones_as_they_are(
    store: Store, defaults: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def before_settings() -> dict[str, Any]:
        states = capture_states()
        del states["settings"]
        return states

    capture_states = capture.process_states
    monkeypatch.setattr(capture, "process_states", before_settings)
    module = types.ModuleType("__main__")
    module.__dict__["x"] = 1
    old = _save(store, module)
    assert "settings" not in store.manifest(old) or store.manifest(old)["settings"] == {}
    pd.set_option("display.max_rows", 5)
    report = restore_namespace(store.blobs, types.ModuleType("__main__"), old, store.manifest(old))
    assert report.not_restored == {} and pd.get_option("display.max_rows") == 5

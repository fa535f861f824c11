"""The process-wide settings a notebook's cells change: how its plots and tables look, how it computes.

``plt.rc("font", size=14)``, ``plt.style.use("ggplot")``, ``pd.set_option("display.max_rows", 200)`` and
``np.set_printoptions(precision=3)`` change how the session looks, and what they change lives in the
library, not in a variable. A checkpoint keeps them beside the random states:

- matplotlib's ``rcParams`` (what ``plt.rc``, ``plt.style.use``, ``sns.set_theme`` and
  ``mpl.rcParams[...] = ...`` set), except the backend and interactive mode, which the frontend decides;
- pandas' options (``pd.set_option``, ``pd.options.display.max_rows = ...``), except deprecated ones;
- numpy's print options (``np.set_printoptions``) and floating-point error handling (``np.seterr``);
- torch's default dtype, deterministic algorithms, float32 matmul precision, grad mode
  (``torch.set_grad_enabled(False)``), anomaly detection, cuDNN's benchmark and deterministic flags, and
  print options (``torch.set_printoptions(precision=2)``);
- scikit-learn's config (``sklearn.set_config(transform_output="pandas")``);
- the ``decimal`` context (``decimal.getcontext().prec = 6``, its rounding and traps);
- Python's recursion limit and the digits an ``int`` may print with (``sys.set_int_max_str_digits``).

Only libraries already imported are read (``sys.modules``: nothing is imported to read it), and of
each only what differs from what a fresh process starts with, as plain data; a value that is not plain
(a ``cycler``, a ``float_format`` function) is kept serialized on its own, so that one that cannot be
loaded again costs only itself. Reading compares with the starting values, taken once per process.
numpy 2 holds its options in a context variable, which only the thread that runs the cells sees, and so
does decimal its context, scikit-learn its config and torch its grad mode (a thread's own): ``remember``
notes them there as each cell ends, for checkpoints taken by another thread.

Applying puts each library's settings back to its starting values and then applies what was kept, so
an undo to a cell before a change undoes it. A library the checkpoint has settings for is imported
first if it is not yet (the session had it imported). A setting that cannot be applied (a key this
version does not have, a value it refuses) is returned with why; the others are applied all the same.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
import threading
import types
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from . import serialize

Settings = dict[str, dict[str, Any]]  # library: {setting: value}, only what differs from the start


@dataclass(frozen=True)
class Opaque:
    """A setting's value that is not plain data, serialized on its own (loaded only when it is applied)."""

    serializer: str
    payload: bytes


@dataclass(frozen=True)
class Library:
    """How to read and write one library's settings."""

    module: str  # read only while it is in sys.modules
    title: str  # how they are named together (the timeline's changed column)
    label: Callable[[str], str]  # how one is named in a restore's report
    start: Callable[[types.ModuleType], dict[str, Any]]  # the values a fresh process starts with
    read: Callable[[types.ModuleType], Iterable[tuple[str, Any]]]  # the current values
    write: Callable[[types.ModuleType, str, Any], None]  # set one
    # Held in a context variable (numpy 2): each thread sees its own, and only the cells' thread sees theirs.
    in_context: bool = False
    # Changes when settings are added after import (an extension registering pandas options): start again.
    generation: Callable[[types.ModuleType], int] = lambda module: 0


# -- matplotlib ----------------------------------------------------------------

# Chosen by the frontend and the kernel (``%matplotlib inline``, MPLBACKEND), not by the look of a plot.
_MPL_LEFT_OUT = frozenset({"backend", "backend_fallback", "interactive"})


def _mpl_start(mpl: types.ModuleType) -> dict[str, Any]:
    # rcParamsOrig: the library's defaults with the user's matplotlibrc, as loaded at import.
    return {k: v for k, v in dict.items(mpl.rcParamsOrig) if k not in _MPL_LEFT_OUT}


def _mpl_read(mpl: types.ModuleType) -> Iterable[tuple[str, Any]]:
    return dict.items(mpl.rcParams)  # the stored values, without the deprecation checks of __getitem__


def _mpl_write(mpl: types.ModuleType, key: str, value: Any) -> None:
    if key not in mpl.rcParams:
        raise KeyError(f"this matplotlib ({mpl.__version__}) has no such setting")
    mpl.rcParams[key] = value  # validated, as plt.rc validates it


# -- pandas --------------------------------------------------------------------


def _pandas_config(pd: types.ModuleType) -> Any:
    from pandas._config import config  # the option registry: where pandas keeps each option's default

    return config


def _pandas_start(pd: types.ModuleType) -> dict[str, Any]:
    config = _pandas_config(pd)
    return {k: o.defval for k, o in config._registered_options.items() if k not in config._deprecated_options}


def _pandas_read(pd: types.ModuleType) -> Iterable[tuple[str, Any]]:
    """The options' values, from the nested dict pandas keeps them in (get_option takes 1.3 µs an option,
    most of the reading), each one not found there through get_option."""
    config = _pandas_config(pd)
    registered, deprecated = config._registered_options, config._deprecated_options
    flat: dict[str, Any] = {}
    stack: list[tuple[str, dict[str, Any]]] = [("", config._global_config)]
    while stack:
        prefix, level = stack.pop()
        for key, value in level.items():
            if type(value) is dict and prefix + key not in registered:
                stack.append((f"{prefix}{key}.", value))
            else:
                flat[prefix + key] = value
    return ((k, flat[k] if k in flat else pd.get_option(k)) for k in registered if k not in deprecated)


def _pandas_write(pd: types.ModuleType, key: str, value: Any) -> None:
    if key not in _pandas_config(pd)._registered_options:  # set_option takes a key that only starts one (a pattern)
        raise KeyError(f"this pandas ({pd.__version__}) has no such option")
    pd.set_option(key, value)


# -- numpy ---------------------------------------------------------------------

# The documented defaults of np.set_printoptions and np.seterr.
_NUMPY_PRINT = {
    "edgeitems": 3,
    "threshold": 1000,
    "floatmode": "maxprec",
    "precision": 8,
    "suppress": False,
    "linewidth": 75,
    "nanstr": "nan",
    "infstr": "inf",
    "sign": "-",
    "formatter": None,
    "legacy": False,
    "override_repr": None,
}
_NUMPY_ERRORS = {"divide": "warn", "over": "warn", "under": "ignore", "invalid": "warn"}


def _print_write(np: types.ModuleType, key: str, value: Any) -> None:
    current = np.get_printoptions()
    if key not in current:
        raise KeyError(f"this numpy ({np.__version__}) has no such print option")
    np.set_printoptions(**(current | {key: value}))  # each call resets what it is not given: give it all


def _errors_write(np: types.ModuleType, key: str, value: Any) -> None:
    if key not in np.geterr():
        raise KeyError(f"this numpy ({np.__version__}) has no such error category")
    np.seterr(**{key: value})


# -- torch ---------------------------------------------------------------------

# What a fresh process starts with: torch.set_default_dtype (by the dtype's name), torch.use_deterministic_algorithms
# (True, False or "warn only"), torch.set_float32_matmul_precision, torch.set_grad_enabled (the calling thread's),
# torch.autograd.set_detect_anomaly, and torch.backends.cudnn's benchmark and deterministic flags.
_TORCH_START = {
    "default_dtype": "float32",
    "deterministic_algorithms": False,
    "float32_matmul_precision": "highest",
    "grad_enabled": True,
    "detect_anomaly": False,
    "cudnn_benchmark": False,
    "cudnn_deterministic": False,
    **{f"print_{k}": v for k, v in {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80}.items()},
    "print_sci_mode": None,
}


def _torch_read(torch: types.ModuleType) -> Iterable[tuple[str, Any]]:
    yield "default_dtype", str(torch.get_default_dtype()).removeprefix("torch.")
    deterministic = torch.are_deterministic_algorithms_enabled()
    yield (
        "deterministic_algorithms",
        "warn only" if torch.is_deterministic_algorithms_warn_only_enabled() else deterministic,
    )
    yield "float32_matmul_precision", torch.get_float32_matmul_precision()
    yield "grad_enabled", torch.is_grad_enabled()
    yield "detect_anomaly", torch.is_anomaly_enabled()
    yield "cudnn_benchmark", torch.backends.cudnn.benchmark
    yield "cudnn_deterministic", torch.backends.cudnn.deterministic
    yield from ((f"print_{k}", v) for k, v in vars(torch._tensor_str.PRINT_OPTS).items())


def _torch_write(torch: types.ModuleType, key: str, value: Any) -> None:
    if key == "default_dtype":
        torch.set_default_dtype(getattr(torch, value))
    elif key == "deterministic_algorithms":
        torch.use_deterministic_algorithms(bool(value), warn_only=value == "warn only")
    elif key == "float32_matmul_precision":
        torch.set_float32_matmul_precision(value)
    elif key == "grad_enabled":
        torch.set_grad_enabled(bool(value))
    elif key == "detect_anomaly":
        torch.autograd.set_detect_anomaly(bool(value))
    elif key in ("cudnn_benchmark", "cudnn_deterministic"):
        setattr(torch.backends.cudnn, key.removeprefix("cudnn_"), bool(value))
    elif key.startswith("print_"):
        torch.set_printoptions(**{key.removeprefix("print_"): value})
    else:
        raise KeyError("this version of jupyter-ckpt does not set it")


# -- scikit-learn ----------------------------------------------------------------


def _sklearn_start(sklearn: types.ModuleType) -> dict[str, Any]:
    from sklearn import _config  # set_config changes the thread's copy: the process's stays as it started

    return dict(_config._global_config)


def _sklearn_write(sklearn: types.ModuleType, key: str, value: Any) -> None:
    if key not in sklearn.get_config():
        raise KeyError(f"this scikit-learn ({sklearn.__version__}) has no such setting")
    sklearn.set_config(**{key: value})


# -- decimal -------------------------------------------------------------------

_DECIMAL_FIELDS = ("prec", "rounding", "Emin", "Emax", "capitals", "clamp")


def _decimal_read(decimal: types.ModuleType, context: Any = None) -> Iterable[tuple[str, Any]]:
    context = decimal.getcontext() if context is None else context
    yield from ((field, getattr(context, field)) for field in _DECIMAL_FIELDS)
    yield "traps", sorted(signal.__name__ for signal, on in context.traps.items() if on)


def _decimal_write(decimal: types.ModuleType, key: str, value: Any) -> None:
    context = decimal.getcontext()
    if key == "traps":
        for signal in context.traps:
            context.traps[signal] = signal.__name__ in value
    elif key in _DECIMAL_FIELDS:
        setattr(context, key, value)
    else:
        raise KeyError("decimal contexts have no such field")


# -- Python --------------------------------------------------------------------

# The interpreter's limits a cell raises, and how each is read and set.
_PYTHON_LIMITS = {
    "recursionlimit": ("getrecursionlimit", "setrecursionlimit"),
    "int_max_str_digits": ("get_int_max_str_digits", "set_int_max_str_digits"),
}


def _python_start(sys_module: types.ModuleType) -> dict[str, Any]:
    digits = sys_module.flags.int_max_str_digits  # -1: not set by -X or the environment
    return {"recursionlimit": 1000, "int_max_str_digits": 4300 if digits == -1 else digits}


def _python_write(sys_module: types.ModuleType, key: str, value: Any) -> None:
    if key not in _PYTHON_LIMITS:
        raise KeyError("this version of jupyter-ckpt does not set it")
    getattr(sys_module, _PYTHON_LIMITS[key][1])(value)


LIBRARIES: dict[str, Library] = {
    "matplotlib": Library(
        "matplotlib", "matplotlib rcParams", lambda k: f"matplotlib rcParams[{k!r}]", _mpl_start, _mpl_read, _mpl_write
    ),
    "pandas": Library(
        "pandas",
        "pandas options",
        lambda k: f"pandas option {k!r}",
        _pandas_start,
        _pandas_read,
        _pandas_write,
        generation=lambda pd: len(_pandas_config(pd)._registered_options),
    ),
    "numpy print": Library(
        "numpy",
        "numpy print options",
        lambda k: f"numpy print option {k!r}",
        lambda np: {k: v for k, v in _NUMPY_PRINT.items() if k in np.get_printoptions()},
        lambda np: np.get_printoptions().items(),
        _print_write,
        in_context=True,
    ),
    "numpy errors": Library(
        "numpy",
        "numpy seterr",
        lambda k: f"numpy floating-point errors {k!r} (np.seterr)",
        lambda np: dict(_NUMPY_ERRORS),
        lambda np: np.geterr().items(),
        _errors_write,
        in_context=True,
    ),
    "torch": Library(
        "torch",
        "torch defaults",
        lambda k: f"torch {k}",
        lambda torch: dict(_TORCH_START),
        _torch_read,
        _torch_write,
        in_context=True,  # set_grad_enabled changes the calling thread's
    ),
    "scikit-learn": Library(
        "sklearn",
        "scikit-learn config",
        lambda k: f"scikit-learn config {k!r}",
        _sklearn_start,
        lambda sklearn: sklearn.get_config().items(),
        _sklearn_write,
        in_context=True,  # set_config changes the calling thread's
    ),
    "decimal": Library(
        "decimal",
        "decimal context",
        lambda k: f"decimal context {k}",
        lambda decimal: dict(_decimal_read(decimal, decimal.DefaultContext)),
        _decimal_read,
        _decimal_write,
        in_context=True,
    ),
    "python": Library(
        "sys",
        "Python limits",
        lambda k: f"sys.{_PYTHON_LIMITS[k][1]}" if k in _PYTHON_LIMITS else f"Python {k}",
        _python_start,
        lambda sys_module: [(k, getattr(sys_module, get)()) for k, (get, _) in _PYTHON_LIMITS.items()],
        _python_write,
    ),
}

# Each library's starting values, taken once per process (per module object and generation).
_STARTS: dict[str, tuple[types.ModuleType, int, dict[str, Any]]] = {}
# The last non-plain value seen for each setting and its serialized form: a style's cycler is not
# serialized again at every checkpoint while it stays the same object.
_OPAQUE: dict[tuple[str, str], tuple[Any, Opaque | None]] = {}


def _start(name: str, library: Library, module: types.ModuleType) -> dict[str, Any]:
    cached = _STARTS.get(name)
    generation = library.generation(module)
    if cached is None or cached[0] is not module or cached[1] != generation:
        cached = _STARTS[name] = (module, generation, library.start(module))
    return cached[2]


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # an == that raises, or returns an array
        return False


def _plain(value: Any) -> bool:
    if value is None or type(value) in (str, int, float, bool):
        return True
    if type(value) in (list, tuple):
        return all(_plain(v) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    return False


def _kept(name: str, key: str, value: Any) -> Any:
    """``value`` as a checkpoint keeps it: itself if plain, else serialized on its own (None: it cannot be)."""
    if _plain(value):
        return value
    last = _OPAQUE.get((name, key))
    if last is not None and last[0] is value:
        return last[1]
    try:
        # In a kernel __main__ is the notebook: a float_format lambda defined there is saved by value.
        packed = serialize.dumps({"value": value}, sys.modules["__main__"])
        opaque = Opaque(packed.serializer, packed.payload) if not packed.buffers else None
    except Exception:  # NotSerializable, or whatever a __reduce__ raises
        opaque = None
    _OPAQUE[(name, key)] = (value, opaque)
    return opaque


def _read(names: Iterable[str]) -> Settings:
    found: Settings = {}
    for name in names:
        library = LIBRARIES[name]
        module = sys.modules.get(library.module)
        if module is None:
            continue
        try:
            start = _start(name, library, module)
            changed = {}
            for key, value in library.read(module):
                if key in start and not _same(value, start[key]):
                    kept = _kept(name, key, value)
                    if kept is not None:
                        changed[key] = kept
        except Exception:  # a library version whose registry moved: its settings are not kept
            continue
        if changed:
            found[name] = dict(sorted(changed.items()))
    return found


# What the thread that runs the cells last saw of the settings held in a context variable, and its id.
_SEEN: tuple[int, Settings] | None = None
_IN_CONTEXT = [n for n, library in LIBRARIES.items() if library.in_context]


def remember() -> None:
    """Note the settings held in a context variable as the cells' thread sees them: called there, as each
    cell ends, so that a checkpoint taken by another thread (the idle one) keeps them too."""
    global _SEEN
    _SEEN = (threading.get_ident(), _read(_IN_CONTEXT))
    serialize.remember_cells()  # and the notebook's own context variables and thread-local objects


def read() -> Settings:
    """The settings of the libraries imported now that differ from what a fresh process starts with.

    Those held in a context variable are read here when this is the thread that ran the cells (or
    none said which did); from another thread they are what that one last saw (``remember``).
    Never raises: a library whose settings cannot be read is left out.
    """
    seen = _SEEN
    if seen is None or seen[0] == threading.get_ident():
        return _read(LIBRARIES)
    found = _read(n for n in LIBRARIES if n not in _IN_CONTEXT)
    found.update(seen[1])
    return dict(sorted(found.items()))


def fingerprints(settings: Settings) -> dict[str, str]:
    """A digest of each library's kept settings, by its title: what tells two checkpoints' settings apart
    without loading them."""
    found = {}
    for name, kept in settings.items():
        library = LIBRARIES.get(name)
        title = library.title if library is not None else f"{name} settings"
        found[title] = hashlib.blake2b(repr(sorted(kept.items())).encode(), digest_size=8).hexdigest()
    return found


def apply(settings: Settings, module: types.ModuleType) -> dict[str, str]:
    """Make each library's settings those of ``settings``: its starting values, then what was kept.

    ``module`` is the notebook's (a kept function refers to it). Returns the settings that could not
    be applied, by name, with why; never raises.
    """
    if not isinstance(settings, dict):
        return {"settings": f"not applied: a {type(settings).__name__}, not a record of settings"}
    unknown = [name for name in settings if name not in LIBRARIES]  # kept by a newer jupyter-ckpt
    failed = {f"{name} settings": "not applied: this version of jupyter-ckpt does not keep them" for name in unknown}
    for name, library in LIBRARIES.items():
        kept = settings.get(name, {})
        if not isinstance(kept, dict):
            failed[f"{name} settings"] = f"not applied: a {type(kept).__name__}, not a record of settings"
            continue
        lib = sys.modules.get(library.module)
        if lib is None and kept:
            try:  # the session had it imported: its settings come back with it
                lib = importlib.import_module(library.module)
            except Exception as e:
                failed[f"{name} settings"] = f"import {library.module} failed: {type(e).__name__}: {e}"
                continue
        if lib is None:
            continue
        try:
            start = _start(name, library, lib)
            current = dict(library.read(lib))
        except Exception as e:
            failed[f"{name} settings"] = f"could not be read: {type(e).__name__}: {e}"
            continue
        target = {k: v for k, v in start.items() if k not in kept}  # kept keys come last, in their order
        target.update(kept)
        for key, value in target.items():
            try:
                if isinstance(value, Opaque):
                    value = serialize.loads(serialize.Packed(value.serializer, value.payload), module)["value"]
                if key in current and _same(current[key], value):
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # a deprecated setting the cells set: said when they set it
                    library.write(lib, key, value)
            except Exception as e:
                failed[library.label(key)] = f"not applied ({type(e).__name__}: {e}); left as it was"
    if _SEEN is not None and _SEEN[0] == threading.get_ident():
        remember()  # what this thread sees now: the checkpoint's
    return failed

"""Turning a group of variables into bytes and back, and previewing a value.

dill is the contract: whatever dill round-trips, a checkpoint round-trips. Three
other picklers are tried around it, and the one used is recorded per group:

1. ``pickle`` (the C pickler, protocol 5) when the group holds nothing defined in
   the notebook itself. It is several times faster than dill on object graphs.
   Large buffers (numpy arrays and everything built on them) go out of band:
   they are stored as content-addressed chunks, and a lazy restore maps the raw
   ones back instead of reading them. Views are stored as views of their root
   array (of objects too), and arrays are rebuilt directly on their buffer. Large arrays of
   strings (pandas' string and object columns) are stored as one text, out of
   band too, not as one pickled object per element.
2. ``hybrid`` for a group that holds notebook classes and functions: they are
   pickled by dill, in a stream of their own, and everything else (the instances)
   by the C pickler (``_HybridPickler``), 6-8 times faster than dill on records
   of a notebook class; unless the two streams would hold one mutable object.
3. ``dill`` for everything that mentions the notebook: functions, classes,
   lambdas and closures defined there are pickled by value, and their globals
   by reference to the notebook namespace, so a restored function sees the
   restored variables.
4. ``cloudpickle`` where dill fails (a notebook Enum, or a torch model together
   with its optimizer when the hybrid cannot take it), or where dill would save a notebook object as a reference to its
   name (a class whose instances it holds itself): a fresh kernel could not
   resolve that name while loading, so dill's warning counts as a failure.

Whatever the pickler, an object an imported library module holds (``os.environ``,
``sys.stdout``, ``numpy.random.rand``, ``scipy.stats.norm``) is saved as that
module and name, and comes back as the very object that module holds then
(``_Library``); plain data (containers, numbers, strings, arrays) is never looked
up. The IPython shell (``ip = get_ipython()``) comes back as the loading kernel's.
A tensor keeps its gradient, and an array of an ndarray subclass its attributes,
which torch's and numpy's pickling drop; a tensor is saved on its storage, out of
band, so views of one storage come back on one.
A notebook class whose metaclass or base has hooks of the notebook's (``__new__``,
``__init__``, ``__init_subclass__``: a registry), or that has ``__slots__``, is
made again as a shell with its attributes set after, without running those hooks
again (``_reduce_notebook_class``). A namedtuple class no
import finds is made again by ``namedtuple``, with its defaults and module, and
what the notebook added. dill keeps a function's qualified name (one that
``functools.wraps`` gave it) where it would take its code's.
A ``TypeVar`` or ``NewType`` made in the notebook is saved as the call that made
it, not as a name the loading kernel has not bound yet, and so is an array or
pointer type of ctypes (``c_double * 3``), which ctypes names as made in the
notebook; a ``TypedDict`` made in the notebook as its metaclass makes it; a PIL
font read from bytes (``ImageFont.load_default()``) as made from those bytes
again; an instance whose ``__new__`` requires arguments pickle does not know is
made by its builtin base's, and one of a notebook subclass of ``Counter``,
``Decimal`` or another type pickled from its value alone keeps its attributes.
Arrays and views saved read-only come back read-only. pandas frames, series and
indexes that shared values keep sharing them, and pandas' Copy-on-Write tracking
of that sharing (``_SharedValues``).

Notebook functions wrapped in ``functools.lru_cache`` / ``cache`` are saved as
the function and the cache's parameters; their cached results are not kept.
Open files are saved as path, mode and position and reopened on restore; one
opened for writing is reopened for appending, never truncated. A gzip, bz2 or
lzma file read from a path (as text too) is reopened at its place in the
decompressed data; one open for writing is refused, with why. A dict's view
(``d.keys()``, ``types.MappingProxyType(d)``) is saved as a view of its dict,
which comes back live, not as a view of a copy.
"""

from __future__ import annotations

import abc
import array
import bisect
import collections
import contextlib
import contextvars
import copyreg
import csv
import ctypes
import enum
import errno
import functools
import gc
import importlib
import importlib.util
import inspect
import io
import json
import json.scanner
import linecache
import mmap
import operator
import os
import pickle
import pickletools
import re
import reprlib
import struct
import sys
import tempfile
import threading
import types
import typing
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import count, repeat
from typing import Any

import cloudpickle
import dill

from . import memory

# Buffers smaller than this stay inside the pickle stream: a separate file would cost more than it saves.
OUT_OF_BAND_MIN = 64 * 1024
REPR_MAX = 200
_CONTAINERS = (dict, list, tuple, set, frozenset)
# Object arrays of at least this many elements, mostly strings, are stored as text.
TEXT_MIN = 4096
_SEPARATOR = "\x00"
# Elements looked at to tell whether an array's strings repeat (then each distinct one is stored once).
_SAMPLE = 1000
_LRU_WRAPPER = type(functools.lru_cache(maxsize=None)(len))
_KEY_WRAPPER = type(functools.cmp_to_key(operator.sub))  # functools' C type, which pickle refuses
_TYPED_DICT = type(typing.TypedDict("_TYPED_DICT", {}))  # type: ignore[operator]  # the metaclass of a ``TypedDict``
# The metaclasses of ``c_double * 3`` and ``POINTER(c_double)``, classes ctypes makes (once each) in the module that
# asks: made in a cell, they look like notebook classes, which no pickler can make again (``_reduce_ctypes_made``).
_CTYPES_MADE = (type(ctypes.c_char * 1), type(ctypes.POINTER(ctypes.c_char)))
# The descriptor of each field a ctypes structure's ``_fields_`` makes (``_ctypes.CField``).
_CTYPES_FIELD = type(type("_Fields", (ctypes.Structure,), {"_fields_": [("x", ctypes.c_int)]}).x)  # type: ignore[attr-defined]
WEAK_TYPES = frozenset({weakref.WeakSet, weakref.WeakValueDictionary, weakref.WeakKeyDictionary})
WEAK_PROXIES = frozenset({weakref.ProxyType, weakref.CallableProxyType})
# CPython's stable ABI (kept when deprecated): a borrowed reference, so taken as an address and read by ``cast``.
_WEAKREF_OBJECT = ctypes.pythonapi.PyWeakref_GetObject
_WEAKREF_OBJECT.argtypes, _WEAKREF_OBJECT.restype = (ctypes.py_object,), ctypes.c_void_p
HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement, not by C
_FILE_TYPES = frozenset({io.TextIOWrapper, io.BufferedReader, io.BufferedWriter, io.BufferedRandom, io.FileIO})


def _read_only(mapping: Any) -> types.MappingProxyType[Any, Any]:
    return types.MappingProxyType(mapping)


# A view of a dict (``d.keys()``, an OrderedDict's, ``types.MappingProxyType(d)``), by type, and what makes it
# from the dict.
DICT_VIEWS: dict[type, Callable[[Any], Any]] = {
    type({}.keys()): dict.keys,
    type({}.values()): dict.values,
    type({}.items()): dict.items,
    type(collections.OrderedDict().keys()): collections.OrderedDict.keys,
    type(collections.OrderedDict().values()): collections.OrderedDict.values,
    type(collections.OrderedDict().items()): collections.OrderedDict.items,
    types.MappingProxyType: _read_only,
}


class NotSerializable(Exception):
    """No pickler could serialize a group; ``reason`` says why, in dill's words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _DefinedInNotebook(Exception):
    """Raised inside the fast pickler to hand the group on to dill."""


@dataclass
class Packed:
    """A group's pickle stream and its out-of-band buffers.

    ``mappable`` says, buffer by buffer, which are the memory of a numpy array:
    plain data that nothing unpickles, which a lazy restore may map before its
    signatures are checked. Every other buffer (a pickle stream of ``_Segments``,
    bytes some ``__reduce_ex__`` handed out) is read and verified first.
    """

    serializer: str
    payload: bytes
    buffers: list[memoryview] = field(default_factory=list)
    mappable: list[bool] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return len(self.payload) + sum(b.nbytes for b in self.buffers)


@contextlib.contextmanager
def as_main(module: types.ModuleType) -> Iterator[None]:
    """Make ``module`` the ``__main__`` that pickled functions refer to (a no-op in a kernel)."""
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        yield
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


_FUNCTION_TYPES = (types.FunctionType, _LRU_WRAPPER)


def _in_notebook(obj: Any) -> bool:
    return isinstance(obj, (*_FUNCTION_TYPES, type)) and _notebook_module(obj)


def _notebook_module(obj: Any) -> bool:
    """Whether a class or function is the notebook's: its module is ``__main__``, or it has none (a function that
    ``exec(source, namespace)`` made) and the notebook holds it under its name. pickle looked for the latter by
    name in every module, found it among the notebook's variables, and saved it as that name, which a restore
    could not load: the restore is making it. So is a function whose globals are the notebook's, whatever module
    it names (``functools.wraps(json.dumps)`` copies ``__module__`` and ``__qualname__``): it was saved as the
    library's function it names, and one the notebook put in that function's place (``json.dumps = logged``)
    came back as the library's own."""
    module = getattr(obj, "__module__", None)
    if module == "__main__":
        return True
    main = sys.modules.get("__main__")
    if main is None:
        return False
    if type(obj) is types.FunctionType:
        return obj.__globals__ is vars(main) or (module is None and vars(main).get(obj.__qualname__) is obj)
    return module is None and vars(main).get(getattr(obj, "__qualname__", "")) is obj


def _located(obj: Any) -> bool:
    """Whether a class or function is what its module (imported, not the notebook) holds under its qualified
    name: then every pickler saves it as that name."""
    try:
        module = sys.modules.get(obj.__module__ or "__main__")
        if module is None or module.__name__ == "__main__" or _notebook_module(obj):
            return False
        found: Any = module
        for part in obj.__qualname__.split("."):
            found = getattr(found, part)
    except Exception:  # no such name, "<locals>", a lazy module's import error, a proxy's __getattr__
        return False
    return found is obj


def find(path: str, notebook: dict[str, Any] | None = None, *, import_missing: bool = True) -> Any:
    """What ``module:qualname`` names: in the namespace ``notebook`` if that is the module's (its ``__name__``),
    else in the module, imported if it is not yet and ``import_missing``. Raises ImportError, KeyError or
    AttributeError if there is no such object."""
    module_name, _, qualname = path.partition(":")
    first, *rest = qualname.split(".")
    if notebook is not None and module_name == notebook.get("__name__"):
        found = notebook[first]
    else:
        found = getattr(importlib.import_module(module_name) if import_missing else sys.modules[module_name], first)
    for part in rest:
        found = getattr(found, part)
    return found


def path_of(obj: Any, notebook: dict[str, Any] | None = None) -> str | None:
    """``module:qualname`` for a class or function ``find`` finds again as it is now (nothing imported), else None
    (made in a function, deleted, replaced)."""
    path = f"{obj.__module__}:{obj.__qualname__}"
    try:
        return path if find(path, notebook, import_missing=False) is obj else None
    except (AttributeError, KeyError):
        return None


# Types whose objects are data, never looked up among the library modules' attributes (``_referable``).
_PLAIN = frozenset({dict, list, tuple, set, frozenset, bytearray, bytes, str, int, float, complex, bool, type(None)})
_REFERABLE: dict[type, bool] = {}


def _referable(t: type) -> bool:
    """Whether an object of type ``t`` is saved as the library module's attribute it is, if it is one.

    Not plain data (containers, numbers, strings, arrays: a library's dict is copied; numpy's dtypes and scalars,
    which pandas holds as constants: every int64 array was saved as needing ``pandas.core.arrays.datetimes.
    INT64_DTYPE`` once pandas was imported), nor a class or a module (every pickler saves those by name), nor an
    exception (``sys.last_value`` is the kernel's last error, not a library's), nor an instance of a notebook
    class. Decided once per type.
    """
    referable = _REFERABLE.get(t)
    if referable is None:
        numpy = sys.modules.get("numpy")
        values = (numpy.dtype, numpy.generic) if numpy is not None else ()
        plain = t in _PLAIN or (numpy is not None and t is numpy.ndarray) or issubclass(t, values)
        referable = not (plain or issubclass(t, (type, types.ModuleType, BaseException)) or t.__module__ == "__main__")
        _REFERABLE[t] = referable
    return referable


class _Library:
    """Where each object held by an imported library module can be found again: its module and name.

    ``from os import environ``, ``from numpy.random import rand``, ``from scipy.stats import norm``,
    ``out = sys.stdout``: pickled by value, each came back as a copy, and ``rand`` drew from a copy of
    numpy's global generator. Such an object is saved as its module and name, and comes back as the very
    object that module holds (``_attribute``).

    The index is built when first consulted, and extended when consulted again after modules were imported:
    every module in ``sys.modules`` but the notebook (and those no import would find again) is looked
    through, for objects of types ``_referable`` takes (50 ms with pandas, scikit-learn and torch imported).
    Only the objects of a type some library module holds are looked up (``types``): not a date, a frame or
    a numpy integer. An entry is used only while the module still holds the object under that name, and
    never for the notebook's own functions (a notebook function a library was given as a hook). Of several
    places, the most public one is kept: ``numpy.random.rand`` rather than ``numpy.random.mtrand.rand``.
    """

    def __init__(self) -> None:
        self.places: dict[int, tuple[str, str]] = {}
        self.types: set[type] = set()
        self.seen: set[str] = set()
        self.count = 0
        # The module attributes the notebook's cells assigned (``assigned_by_notebook``): never a place.
        self.assigned: set[tuple[str, str]] = set()

    def assign(self, places: Iterable[tuple[str, str]]) -> None:
        new = set(places) - self.assigned
        if new:
            self.assigned |= new
            for key in [key for key, place in self.places.items() if place in new]:
                del self.places[key]

    def current(self) -> _Library:
        if len(sys.modules) != self.count:
            self._extend()
        return self

    def find(self, obj: Any) -> tuple[str, str] | None:
        place = self.current().places.get(id(obj))
        return None if place is None else self.holds(place, obj)

    @staticmethod
    def holds(place: tuple[str, str], obj: Any) -> tuple[str, str] | None:
        """The place, if its module still holds ``obj`` there and ``obj`` is no function of the notebook's."""
        module = sys.modules.get(place[0])
        if module is None or vars(module).get(place[1]) is not obj:
            return None
        function = obj.__func__ if type(obj) is types.MethodType else obj
        if type(function) in _FUNCTION_TYPES and _notebook_module(function):
            return None
        return place

    def _extend(self) -> None:
        places = self.places
        for name, module in list(sys.modules.items()):
            if name in self.seen:
                continue
            self.seen.add(name)
            if not isinstance(module, types.ModuleType) or getattr(module, "__spec__", None) is None:
                continue
            if getattr(module, "__name__", None) == "__main__":
                continue
            for attr, value in list(vars(module).items()):
                t = type(value)
                if not _referable(t):
                    continue
                place = (name, attr)
                if place in self.assigned:
                    continue
                known = places.setdefault(id(value), place)
                if known is not place and _publicity(place) < _publicity(known):
                    places[id(value)] = place
                if t not in self.types:
                    self.types.add(t)
                    _REDUCERS.pop(t, None)  # decided when no library module held one: decide again
        self.count = len(sys.modules)


def _publicity(place: tuple[str, str]) -> tuple[bool, int, str, str]:
    """How to rank two places of one object: public names first, then the shortest module path."""
    module, name = place
    private = name.startswith("_") or any(part.startswith("_") for part in module.split("."))
    return private, module.count("."), module, name


_LIBRARY = _Library()


def index_library() -> None:
    """Bring the index of the objects library modules hold up to date (``_Library``). The kernel calls it while
    idle, so that the writers it forks inherit the index instead of each building it again."""
    _LIBRARY.current()


def assigned_by_notebook(places: Iterable[tuple[str, str]]) -> None:
    """Module attributes the notebook's cells assigned (``attributes.py``): what such a place holds is the
    notebook's, which a fresh kernel's module does not have, so it is saved by value, never as that place."""
    _LIBRARY.assign(places)


def _attribute(module: str, name: str) -> Any:
    """What a library module holds under ``name``: an object saved by ``_Library``'s index."""
    return getattr(importlib.import_module(module), name)


def may_be_by_reference(t: type) -> bool:
    """Whether an object of type ``t`` may be saved as where to import it from (``by_reference`` tells): a
    module, a class or function, a builtin, an object of a type some library module holds one of now, or the shell."""
    return (
        t is types.ModuleType
        or t is types.FunctionType
        or t is types.BuiltinMethodType
        or issubclass(t, type)
        or t in _LIBRARY.current().types
        or _shell_class(t)
    )


def importable(module: types.ModuleType) -> bool:
    """Whether importing ``module``'s name gives it, as a restore does: it is registered under its name, or an
    import would find it (a file made into a module by ``module_from_spec`` on the import path). One made in
    the notebook (``types.ModuleType``, a file off the path) is not; nor is one whose parent package is not
    imported, rather than import that here."""
    name = getattr(module, "__name__", None)
    if not isinstance(name, str):
        return False
    registered = sys.modules.get(name)
    if registered is not None:
        return registered is module
    parent = name.rpartition(".")[0]
    if parent and parent not in sys.modules:
        return False
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _reduce_module(module: types.ModuleType) -> Any:
    """A module is saved as its name, which the next kernel imports; one no import would give is refused, so that
    its variable is skipped, with the reason, and offered for replay, rather than saved as a name that fails."""
    if importable(module):
        return NotImplemented
    raise pickle.PicklingError(
        f"module {getattr(module, '__name__', '?')!r} was made in the notebook: no import gives it"
    )


def by_reference(obj: Any) -> bool:
    """Whether every pickler here saves ``obj`` as where to import it from, so that nothing it holds goes with it:
    a module, a class or function found under its module and name, a builtin of a module or of such a class, an
    object a library module holds, the shell."""
    t = type(obj)
    if t is types.ModuleType:
        return True
    if (t is types.FunctionType or issubclass(t, type)) and _located(obj):
        return True
    if t is types.BuiltinMethodType:  # ``len``, ``object.__new__`` (every Enum's ``_new_member_``): pickled by name
        owner = obj.__self__
        return isinstance(owner, types.ModuleType) or (isinstance(owner, type) and _located(owner))
    if t in _LIBRARY.current().types and _LIBRARY.find(obj) is not None:
        return True
    return obj is _the_shell()


def _the_shell() -> Any:
    """The IPython shell this process runs, or None. A variable that held the saving kernel's shell
    (``ip = get_ipython()``) holds the loading kernel's: the shell holds the whole namespace, and no pickler
    saves it."""
    ipython = sys.modules.get("IPython")
    return None if ipython is None else ipython.get_ipython()


def _shell_class(t: type) -> bool:
    shell = _the_shell()
    return shell is not None and type(shell) is t


def _reduce_method(method: types.MethodType) -> Any:
    """A bound method as its function and its object where its name on that object is not its own: a function
    set on an instance as a method (``obj.twice = MethodType(twice, obj)``). pickle saves a bound method as the
    attribute of its object named as its function, which such an object has not, or has only once its own
    attributes are loaded, and the group failed to load."""
    func, owner = method.__func__, method.__self__
    try:  # a method of its class, or a classmethod bound to it; never the instance's own attribute
        own = getattr(owner, func.__name__).__func__ if isinstance(owner, type) else getattr(type(owner), func.__name__)
    except Exception:  # a __getattr__ may raise anything
        own = None
    return NotImplemented if own is func else (types.MethodType, (func, owner))


def _widget_class(t: type) -> bool:
    widgets = sys.modules.get("ipywidgets")
    return widgets is not None and issubclass(t, widgets.Widget)


def _font_class(t: type) -> bool:
    fonts = sys.modules.get("PIL.ImageFont")
    return fonts is not None and issubclass(t, fonts.FreeTypeFont)


def _reduce_font(font: Any) -> Any:
    """A PIL font read from a file object (``ImageFont.load_default()``, ``truetype(BytesIO(...))``) as made
    again from the bytes it read: PIL pickles that file object, at its end, and reading it again found nothing
    (OSError "cannot open resource" at every restore; dill too). One read from a path is PIL's to pickle."""
    if isinstance(font.path, (str, bytes, os.PathLike)):
        return NotImplemented
    return type(font), (io.BytesIO(font.font_bytes), font.size, font.index, font.encoding, font.layout_engine)


def _draw_class(t: type) -> bool:
    """PIL's drawing context, not a subclass of it, which may be made from other arguments than its image's."""
    draw = sys.modules.get("PIL.ImageDraw")
    return draw is not None and t is draw.ImageDraw


def _callbacks_class(t: type) -> bool:
    """matplotlib's registry of a figure's or an artist's callbacks, not a subclass of it."""
    cbook = sys.modules.get("matplotlib.cbook")
    return cbook is not None and t is getattr(cbook, "CallbackRegistry", None)


def _reduce_callbacks(registry: Any) -> Any:
    """matplotlib's pickling of a callback registry, with the callbacks the notebook connected (a function or
    method of its own: ``ax.callbacks.connect('xlim_changed', f)``, ``fig.canvas.mpl_connect(...)``), which it
    drops: it keeps only those it marked itself, and the others were gone after a restore, silently.

    That pickling takes the next id from the registry's counter each time: a figure pickled in the kernel itself (a
    map the cells write was there) was other bytes at every checkpoint, written again and listed as changed. The
    id taken is put back."""
    state = registry.__getstate__()
    registry._cid_gen = count(state["_cid_gen"])
    state["callbacks"] = {
        signal: {
            cid: function
            for cid, proxy in proxies.items()
            if (function := proxy()) is not None and (cid in registry._pickled_cids or _notebook_callback(function))
        }
        for signal, proxies in registry.callbacks.items()
    }
    return copyreg.__newobj__, (type(registry),), state  # type: ignore[attr-defined]


# What a PIL drawing context takes from its image as it is made.
_DRAW_MADE = ("im", "draw", "_image", "palette")


def _notebook_callback(function: Any) -> bool:
    """Whether a callback is the notebook's (a function or method of its own) and can be pickled: one that cannot
    (its closure holds a generator) is left out, as matplotlib leaves it, rather than keep the figure out."""
    if not _in_notebook(getattr(function, "__func__", function)):
        return False
    try:
        _dill_pickler(io.BytesIO(), sys.modules["__main__"]).dump(function)
    except Exception:  # anything a __reduce__ raises; dill's warnings are errors here (``dumps``)
        return False
    return True


def _reduce_draw(draw: Any) -> Any:
    """A PIL drawing context (``ImageDraw.Draw(image)``) as one made again on its image, which the pickler saves
    once with every other name for it, with its settings (``ink``, ``fill``, ``font``): its C drawing object could
    not be pickled, and the variable was not restored."""
    state = {k: v for k, v in vars(draw).items() if k not in _DRAW_MADE}
    return type(draw), (draw._image, draw.mode), state, None, None, _set_state


def _reduce_widget(widget: Any) -> Any:
    """An ipywidgets widget as its class and the values of its traits, then its own attributes (a notebook
    subclass's ``self.data``) and the callbacks the notebook gave it (``observe``, ``on_click``, ``on_msg``).
    Its comm to the front end that showed it cannot be saved, and a restored kernel has none: it is made again
    by its constructor, which opens a comm of its own, so a restored ``slider`` has its value and shows again
    when displayed. The traits every widget has (its model's and view's names, the comm, the log) are its
    class's, and the handlers its class installs come back with the constructor."""
    cls: Any = type(widget)
    if _made_from_arguments(cls):
        raise pickle.PicklingError(f"an ipywidgets {cls.__name__} is made from arguments its traits do not keep")
    plumbing = set(sys.modules["ipywidgets"].Widget.class_trait_names())
    values = {n: getattr(widget, n) for n, t in widget.traits().items() if n not in plumbing and not t.read_only}
    own = {k: v for k, v in vars(widget).items() if not k.startswith("_")}
    return _widget_again, (cls, values), (own, *_callbacks_of(widget)), None, None, _set_widget_state


def _made_from_arguments(cls: Any) -> bool:
    """Whether a widget class's constructor needs an argument no trait holds (``interactive``'s function)."""
    _, *parameters = inspect.signature(cls.__init__).parameters.values()
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return any(p.default is p.empty and p.kind in named and p.name not in cls.class_traits() for p in parameters)


def _given(handler: Any, widget: Any) -> bool:
    """Whether the notebook gave ``widget`` a handler: not one its class installs (its constructor does that
    again), nor a method of a library's widget (``interactive`` watches its controls with its ``update``)."""
    if isinstance(handler, sys.modules["traitlets"].EventHandler):
        return False
    owner = getattr(handler, "__self__", None)
    return owner is not widget and not (_widget_class(type(owner)) and not _in_notebook(type(owner)))


_Observers = list[tuple[str, str, Any]]  # (trait, type of change, handler)
_Dispatched = dict[str, list[Any]]  # a CallbackDispatcher's attribute: its callbacks


def _callbacks_of(widget: Any) -> tuple[_Observers, _Dispatched]:
    dispatcher = sys.modules["ipywidgets"].CallbackDispatcher
    observers = [
        (name, kind, handler)
        for name, kinds in widget._trait_notifiers.items()
        for kind, handlers in kinds.items()
        for handler in handlers
        if _given(handler, widget)
    ]
    held = {**vars(widget), **widget._trait_values}
    dispatched = {
        attribute: [c for c in value.callbacks if _given(c, widget)]
        for attribute, value in held.items()
        if isinstance(value, dispatcher)
    }
    return observers, {a: callbacks for a, callbacks in dispatched.items() if callbacks}


def _widget_again(cls: type, values: dict[str, Any]) -> Any:
    return cls(**values)


def _set_widget_state(widget: Any, state: tuple[dict[str, Any], _Observers, _Dispatched]) -> Any:
    own, observers, dispatched = state
    vars(widget).update(own)
    for name, kind, handler in observers:
        widget.observe(handler, names=name, type=kind)
    for attribute, given in dispatched.items():
        for callback in given:
            getattr(widget, attribute).register_callback(callback)
    return widget


class _TensorStorage:
    """A torch storage's bytes in one pickling, as a numpy array (out of band when large, chunked, as an array's
    memory is): every tensor of the group on that storage is rebuilt on the one storage it loads as. A storage
    on memory torch did not allocate (``torch.from_numpy``) is rebuilt on the array's memory, not a copy."""

    __slots__ = ("__weakref__", "array", "borrowed")

    def __init__(self, array: Any, borrowed: bool) -> None:
        self.array = array
        self.borrowed = borrowed

    def __reduce__(self) -> Any:
        return (_borrowed_storage if self.borrowed else _torch_storage), (self.array,)


_BLOCK = 21  # log2 of the blocks AddressRanges lists ranges under: 2 MiB


class AddressRanges:
    """Values by the range of addresses they hold, to find the one holding a given range. The ranges are taken
    not to overlap (the memory of arrays that own theirs): each is listed, in order of its start, under every
    2 MiB block it touches, so the one that may hold an address is the last to start at or before it there."""

    def __init__(self) -> None:
        self._blocks: dict[int, tuple[list[int], list[tuple[int, Any]]]] = {}

    def add(self, lo: int, hi: int, value: Any) -> None:
        for block in range(lo >> _BLOCK, ((hi - 1) >> _BLOCK) + 1):
            starts, ranges = self._blocks.setdefault(block, ([], []))
            i = bisect.bisect_right(starts, lo)
            starts.insert(i, lo)
            ranges.insert(i, (hi, value))

    def holding(self, lo: int, hi: int) -> Any:
        """The value whose range holds [lo, hi), or None."""
        starts, ranges = self._blocks.get(lo >> _BLOCK, ([], []))
        i = bisect.bisect_right(starts, lo) - 1
        return ranges[i][1] if i >= 0 and hi <= ranges[i][0] else None


class _Memory:
    """The memory one pickling has met, while torch is imported: the numpy arrays that own theirs, one of which a
    tensor's storage may sit on (``t = torch.from_numpy(a)``), and the arrays standing for such storages met
    before their array, which that array is then saved as a view of. Either way ``t`` and ``a`` load on one
    memory, as they were: a write through one is seen through the other. The arrays are only listed until a
    storage on borrowed memory asks for one, which few picklings meet."""

    def __init__(self) -> None:
        self._met: list[Any] = []
        self._arrays: AddressRanges | None = None
        self._storages: AddressRanges | None = None

    def add_array(self, array: Any) -> None:
        if self._arrays is None:
            self._met.append(array)
        else:
            self._arrays.add(*_extent(array), array)

    def add_storage(self, array: Any) -> None:
        if self._storages is None:
            self._storages = AddressRanges()
        self._storages.add(*_extent(array), array)

    def array_of(self, storage: Any) -> Any:
        """A byte view of the array a storage on borrowed memory lies in, if this pickling met that array."""
        if self._arrays is None:
            self._arrays = AddressRanges()
            for met in self._met:
                self._arrays.add(*_extent(met), met)
            self._met = []
        lo, size = storage.data_ptr(), storage.nbytes()
        array = self._arrays.holding(lo, lo + size)
        if array is None:
            return None
        offset = lo - _extent(array)[0]
        return array.reshape(-1, order="A").view(sys.modules["numpy"].uint8)[offset : offset + size]

    def storage_holding(self, array: Any) -> Any:
        """The array standing for a borrowed storage that ``array``'s memory lies in, if one was met first."""
        holder = None if self._storages is None else self._storages.holding(*_extent(array))
        return None if holder is array else holder


_PICKLING = threading.local()  # the ``_Memory`` of the pickling under way in this thread, if torch is imported


# The storage each tensor being pickled sits on, by address and size: the pickler's memo keeps each alive while it
# writes, so a view met after its base (``x[2:5]``, ``x.T``) finds the same one and is saved on it.
_STORAGES: weakref.WeakValueDictionary[tuple[int, int], _TensorStorage] = weakref.WeakValueDictionary()


def _storage_of(tensor: Any) -> _TensorStorage:
    storage = tensor.untyped_storage()
    key = (storage.data_ptr(), storage.nbytes())
    found = _STORAGES.get(key) if key[1] else None
    if found is None:
        borrowed = key[1] > 0 and not storage.resizable()  # on numpy's memory, or a buffer's
        memory: _Memory | None = getattr(_PICKLING, "memory", None)
        array = memory.array_of(storage) if borrowed and memory is not None else None
        if array is None:
            array = _bytes_of(storage)
            if borrowed and memory is not None:
                memory.add_storage(array)
        found = _TensorStorage(array, borrowed)
        if key[1]:
            _STORAGES[key] = found
    return found


class _StorageBytes:
    """A storage's memory as numpy sees it (``__array_interface__``), keeping the storage alive. ``tensor.numpy()``
    would make the storage one no tensor on it can resize again (``resize_`` raised after a checkpoint written in
    the kernel), and its tensors were saved as on borrowed memory from then on: written again, listed changed."""

    def __init__(self, storage: Any) -> None:
        self.storage = storage
        self.__array_interface__ = {
            "data": (storage.data_ptr(), False),
            "shape": (storage.nbytes(),),
            "typestr": "|u1",
            "version": 3,
        }


def _bytes_of(storage: Any) -> Any:
    numpy = sys.modules["numpy"]
    return numpy.asarray(_StorageBytes(storage)) if storage.nbytes() else numpy.empty(0, numpy.uint8)


def _torch_storage(array: Any) -> Any:
    """A storage of torch's own (which a tensor may resize, unlike one on numpy's memory), holding ``array``'s bytes."""
    torch = sys.modules.get("torch") or importlib.import_module("torch")
    return torch.from_numpy(array).clone().untyped_storage()


def _borrowed_storage(array: Any) -> Any:
    """A storage on ``array``'s memory, as ``torch.from_numpy`` makes one."""
    torch = sys.modules.get("torch") or importlib.import_module("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a read-only array: torch warns, as it did when it was made
        return torch.from_numpy(array).untyped_storage()


def _tensor_on(
    storage: Any,
    dtype: Any,
    offset: int,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    requires_grad: bool,
    grad: Any,
    attributes: dict[str, Any] | None,
) -> Any:
    torch = sys.modules.get("torch") or importlib.import_module("torch")
    tensor = torch.empty(0, dtype=dtype).set_(storage, offset, shape, strides)
    if requires_grad:
        tensor.requires_grad_(True)
    if grad is not None:
        tensor.grad = grad
    if attributes:
        tensor.__dict__.update(attributes)
    return tensor


def _view_of_tensor(
    base: Any,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    offset: int,
    attributes: dict[str, Any] | None,
    requires_grad: bool = False,
) -> Any:
    """A view of ``base``, through which gradients reach it if the view had them reach it (``w[:2]`` of a leaf
    ``w`` that requires grad), and whatever grad mode the restore runs in."""
    torch = sys.modules.get("torch") or importlib.import_module("torch")
    with torch.set_grad_enabled(requires_grad):
        view = base.as_strided(shape, strides, offset)
    if attributes:
        view.__dict__.update(attributes)
    return view


def _in_memory(tensor: Any, torch: Any) -> bool:
    """Whether a tensor is a plain one in the kernel's memory, saved on its storage."""
    return (
        type(tensor) is torch.Tensor
        and tensor.layout is torch.strided
        and tensor.device.type == "cpu"
        and not (tensor.is_quantized or tensor.is_nested or tensor.is_conj() or tensor.is_neg())
    )


def _reduce_tensor(obj: Any) -> Any:
    """A tensor in memory as a view of its storage (``_TensorStorage``), with its gradient and attributes.

    torch pickles each tensor with a copy of its storage, inside the pickle stream: ``v = x[2:5]`` came back
    apart from ``x`` (a write through one no longer reached the other), and the bytes of a large tensor were
    written again at every checkpoint that wrote its group. A tensor of another kind (sparse, on a GPU, a
    subclass) is pickled as torch pickles it, with its ``.grad``, which that drops.

    The autograd graph that made a tensor cannot be pickled, and torch's pickling made a leaf that requires grad
    of such a tensor: ``loss.backward()`` after a restore then gave ``w`` no gradient, and said nothing. It comes
    back detached (``requires_grad`` false), so that ``backward()`` raises; a view (``w[:2]``) comes back as that
    view of its base, through which gradients reach a leaf ``w`` again."""
    torch = sys.modules["torch"]
    if _in_memory(obj, torch):
        attributes = dict(vars(obj)) or None
        base = obj._base
        grad_leaf = obj.is_leaf and obj.requires_grad  # a view too once ``requires_grad_()`` made it a leaf
        if base is not None and _in_memory(base, torch) and base.dtype == obj.dtype and not grad_leaf:
            # a view as autograd knows it (``window._base is x``)
            view = (base, tuple(obj.shape), obj.stride(), obj.storage_offset(), attributes, obj.requires_grad)
            return _view_of_tensor, view
        grad = obj.grad if obj.is_leaf else None  # torch warns when asked for a non-leaf's
        view = (obj.dtype, obj.storage_offset(), tuple(obj.shape), obj.stride(), grad_leaf, grad)
        return _tensor_on, (_storage_of(obj), *view, attributes)
    if not obj.is_leaf:  # detached, as above
        return obj.detach().__reduce_ex__(pickle.HIGHEST_PROTOCOL)
    reduced = obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL) if obj.grad is not None else None
    if not isinstance(reduced, tuple) or len(reduced) != 2:
        return NotImplemented
    return _with_grad, (*reduced, obj.grad)


def _with_grad(rebuild: Callable[..., Any], args: tuple[Any, ...], grad: Any) -> Any:
    tensor = rebuild(*args)
    tensor.grad = grad
    return tensor


def _reduce_shell(obj: Any) -> Any:
    return (_the_shell, ()) if obj is _the_shell() else NotImplemented


def _array_from(
    buffer: Any, dtype: Any, shape: tuple[int, ...], order: str, writeable: bool = True, kind: type | None = None
) -> Any:
    """Rebuild an array directly on its buffer, so views of it keep it as their base; of class ``kind`` (a
    ``recarray``) if given; read-only if it was, whichever memory the restore gives it."""
    numpy = sys.modules.get("numpy") or importlib.import_module("numpy")
    array = numpy.ndarray.__new__(kind or numpy.ndarray, shape, dtype, buffer=buffer, order=order)
    if not writeable:
        array.flags.writeable = False
    return array


def _view_of(
    root: Any,
    dtype: Any,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    offset: int,
    kind: type | None = None,
    writeable: bool = True,
) -> Any:
    """Rebuild a numpy view on its (already rebuilt) base array, of class ``kind`` (a ``recarray``) if given,
    read-only if it was (``np.broadcast_to``'s views, or one a cell locked): a write through it must fail again."""
    numpy = sys.modules.get("numpy") or importlib.import_module("numpy")
    view = numpy.ndarray.__new__(kind or type(root), shape, dtype, buffer=root, offset=offset, strides=strides)
    if isinstance(root, numpy.memmap):
        view.__array_finalize__(root)  # a memmap's slice keeps its file and mode, as slicing gives them
    if not writeable:
        view.flags.writeable = False
    return view


def _object_view(root: Any, offset: int, shape: tuple[int, ...], strides: tuple[int, ...], writeable: bool) -> Any:
    """A view of an array of objects (``rows[:, 0]``) on its rebuilt root, which numpy makes on no buffer but an
    array's own (``as_strided``): numpy's pickling copied it, and a write through it no longer reached the root."""
    numpy = sys.modules.get("numpy") or importlib.import_module("numpy")
    start = root.reshape(-1)[offset:]
    return numpy.lib.stride_tricks.as_strided(start, shape, strides, writeable=writeable)


def _extent(a: Any) -> tuple[int, int]:
    """The first and one-past-last byte addresses an array can reach."""
    start = end = a.__array_interface__["data"][0]
    if a.size == 0:
        return start, start
    for n, stride in zip(a.shape, a.strides, strict=True):
        reach = (n - 1) * stride
        start, end = (start + reach, end) if reach < 0 else (start, end + reach)
    return start, end + a.itemsize


def _text_array(text: Any, shape: tuple[int, ...], order: str, codes: Any, others: Any, values: list[Any]) -> Any:
    """Rebuild an object array stored by ``_reduce_text``."""
    numpy = sys.modules.get("numpy") or importlib.import_module("numpy")
    pieces = str(text, "utf-8", "surrogatepass").split(_SEPARATOR)
    strings = numpy.empty(len(pieces), dtype=object)
    strings[:] = pieces
    flat = strings if codes is None else strings.take(codes)
    for i, value in zip(others.tolist(), values, strict=True):
        flat[i] = value
    return flat.reshape(shape, order=order)


def _reduce_text(obj: Any, numpy: Any) -> Any:
    """Pickle a large object array of (mostly) strings as one UTF-8 text, out of band.

    The C pickler spends 240-260 ns on each string: 0.47-0.53 s for a column of 2M.
    Joined into one text the column takes about 0.1 s, or 0.2-0.65 s when its
    values repeat (below), and the text is chunked and content-addressed like an
    array's buffer, so an unchanged column writes nothing and one changed string
    writes one chunk. Elements that are not exact ``str`` (NaN, None, ``pd.NA``)
    are pickled by themselves, with their positions. Arrays whose strings contain
    the separator are left to the pickler.

    When a sample shows values repeating (5 regions, or 5,000 product codes in 2M
    rows), the text holds each distinct string once, with an array of codes: a
    restore then builds the column in 20 ms, not 0.2 s, with one object per
    distinct string. Which equal strings were one object is not kept.
    """
    if obj.size < TEXT_MIN:
        return NotImplemented
    order = "F" if obj.flags.f_contiguous and not obj.flags.c_contiguous else "C"
    items = obj.ravel(order).tolist()
    kinds = set(map(type, items))
    if str not in kinds:
        return NotImplemented
    others = numpy.zeros(0, dtype=numpy.intp)
    if len(kinds) > 1:
        mask = numpy.fromiter(map(operator.is_not, map(type, items), repeat(str)), dtype=bool, count=len(items))
        others = numpy.flatnonzero(mask)
        if len(others) > len(items) // 2:
            return NotImplemented
    sample = [x for x in items[:: max(1, len(items) // _SAMPLE)] if type(x) is str]
    positions = others.tolist()
    values = [items[i] for i in positions]
    for i in positions:
        items[i] = ""
    codes = None
    if len(set(sample)) < 0.99 * len(sample):
        strings = list(dict.fromkeys(items))
        lookup = {s: i for i, s in enumerate(strings)}
        dtype = numpy.min_scalar_type(len(strings))
        codes = numpy.fromiter(map(lookup.__getitem__, items), dtype=dtype, count=len(items))
        items = strings
    text = _SEPARATOR.join(items)
    if text.count(_SEPARATOR) != len(items) - 1:
        return NotImplemented
    data = pickle.PickleBuffer(text.encode("utf-8", "surrogatepass"))
    return _text_array, (data, obj.shape, order, codes, others, values)


def _reduce_array(obj: Any) -> Any:
    """Pickle a numpy array so that arrays sharing memory still share it when rebuilt.

    An array that owns its memory (or sits on a foreign buffer) is stored as its
    buffer, out of band when large; a view is stored as a view of that root,
    which numpy itself would copy; one on a ``bytearray`` (``bytes``, an
    ``array.array``) of the group, as a view of that (``_exporter``). Rebuilt
    arrays sit directly on their buffer, so a view taken after a restore still
    finds them as its base.
    """
    numpy = sys.modules["numpy"]  # an ndarray is here (see _reducer): numpy is imported
    if obj.dtype == object:
        # A view of another variable of the group (``rows[:, 0]`` beside ``rows``); of an array no variable holds
        # (a block of the frame a slice was taken from), only the part it shows.
        root = array_root(obj, numpy)
        variables: set[int] = getattr(_PICKLING, "variables", set())
        if root is obj or id(root) not in variables or type(root) is not numpy.ndarray or not root.flags.c_contiguous:
            return _reduce_text(obj, numpy)
        offset = (obj.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // root.itemsize
        return _object_view, (root, offset, obj.shape, obj.strides, obj.flags.writeable)
    if obj.dtype.hasobject:
        return NotImplemented
    root = array_root(obj, numpy)
    mapped = _file_mapped(root, numpy)
    if mapped and root is obj:
        return _reduce_memmap(obj)
    contiguous = root.flags.c_contiguous or root.flags.f_contiguous
    # A root of a subclass without state of its own (a ``recarray``, whose ``r.a`` is a view of it) is rebuilt
    # on its buffer as a plain array is, so that its views share its memory again.
    plain = type(root) is numpy.ndarray or (_plain_array_class(type(root), numpy) and _finalized(root, numpy))
    if not mapped and (not plain or root.dtype.hasobject or not contiguous):
        return NotImplemented
    kind = type(obj) if type(obj) is not numpy.ndarray else None
    if mapped:  # a slice of a file's read-only map: a view of the map, which a restore maps again
        return _view_on(obj, root, kind)
    if kind is not None and vars(obj) and not kind.__module__.startswith("numpy"):
        # Attributes (a unit, a tag), which numpy's pickling drops: numpy's own subclasses keep what they need.
        return _with_attributes, (obj.view(numpy.ndarray), kind, dict(vars(obj)))
    if kind is not None and not _finalized(obj, numpy):  # a subclass with state of its own: numpy's pickling
        return NotImplemented
    exporter = _exporter(root)
    if exporter is not None:  # on the memory of another of the group's variables (``np.frombuffer(raw)``)
        return _view_on(obj, exporter[0], kind, exporter[1])
    memory: _Memory | None = getattr(_PICKLING, "memory", None)
    if root is obj and memory is not None and obj.dtype.kind not in "mM":
        holder = memory.storage_holding(obj)
        if holder is None:
            memory.add_array(obj)
        else:  # on the memory of a storage that a tensor met before it lies on (_Memory): a view of that
            root = holder
    if root is obj:
        order = "C" if obj.flags.c_contiguous else "F"
        data = obj if order == "C" else obj.T
        if obj.dtype.kind in "mM":
            data = data.reshape(-1).view(numpy.int64)  # datetimes refuse the buffer protocol; their integers do not
        array = (pickle.PickleBuffer(data), obj.dtype, obj.shape, order)
        if kind is not None:
            return _array_from, (*array, obj.flags.writeable, kind)
        return _array_from, array if obj.flags.writeable else (*array, False)
    return _view_on(obj, root, kind)


def array_root(array: Any, numpy: Any) -> Any:
    """The array whose memory ``array`` views (itself if it owns its memory)."""
    root = array
    while isinstance(root.base, numpy.ndarray) or isinstance(getattr(root.base, "base", None), numpy.ndarray):
        # ``as_strided`` (``sliding_window_view``) puts a holder of the array between the view and the array
        root = root.base if isinstance(root.base, numpy.ndarray) else root.base.base
    return root


def _view_on(obj: Any, root: Any, kind: type | None, extent: tuple[int, int] | None = None) -> Any:
    """``obj`` as a view of ``root`` (``_view_of``), if it lies within the memory it has (``extent``, for a root
    that is no array)."""
    lo, hi = _extent(root) if extent is None else extent
    start, end = _extent(obj)
    if start < lo or end > hi:
        return NotImplemented
    offset = obj.__array_interface__["data"][0] - lo
    if kind is None and type(root) is not type(obj):  # a plain array on a subclass's (``recarray.a``) stays plain
        kind = type(obj)
    view = (root, obj.dtype, obj.shape, obj.strides, offset, kind)
    return _view_of, view if obj.flags.writeable else (*view, False)


def _finalized(array: Any, numpy: Any) -> bool:
    """Whether an array has no attributes but those ``__array_finalize__`` gives a view of its memory as its class,
    which a view rebuilt as that class has again: none, or a ``matrix``'s ``_getitem`` (true only inside its
    ``[]``). ``np.asmatrix(base)`` came back apart from ``base``, as numpy's pickling of a matrix makes it."""
    state = vars(array)
    if not state or not type(array).__module__.startswith("numpy"):  # a notebook's attributes: ``_with_attributes``
        return not state
    return bool(state == vars(array.view(numpy.ndarray).view(type(array))))


# The types of the objects besides arrays that arrays may lie on (``np.frombuffer(raw)``, ``bytes`` read-only),
# which a group is saved with an array on, if they are its variables.
_EXPORTERS = frozenset({bytes, bytearray, array.array})


def _exporter(root: Any) -> tuple[Any, tuple[int, int]] | None:
    """The variable of the group an array's memory is, if it is a ``bytes``, ``bytearray`` or ``array.array``
    (``np.frombuffer(raw)``), with the addresses of that memory: the array is saved as a view of it, which a
    write through either reaches again. Any other array on memory not numpy's is saved as a copy."""
    base = root.base
    if base is None:  # most arrays: their own memory
        return None
    exporters: set[int] = getattr(_PICKLING, "exporters", set())
    held: Any = base.obj if type(base) is memoryview else base  # numpy holds a memoryview of a bytearray's
    if id(held) not in exporters:
        return None
    return held, memory.span(memoryview(held))


def _file_mapped(array: Any, numpy: Any) -> bool:
    """Whether an array is a ``numpy.memmap`` of a file that maps it itself."""
    return (
        isinstance(array, numpy.memmap)
        and isinstance(array.base, mmap.mmap)
        and array.mode in ("r", "r+", "w+", "c")
        and isinstance(array.filename, (str, os.PathLike))
    )


def _reduce_memmap(obj: Any) -> Any:
    """A memory map of a file (``np.memmap(path)``, ``np.load(path, mmap_mode=...)``, ``open_memmap``) as the
    file's place, mapped again by a restore, as an open file is opened again.

    A read-only map's bytes are the file's, which no cell can change: a checkpoint copied them into the store
    (a dataset of many GiB, or none at all where that would take the disk under its floor) and hashed them at
    each checkpoint, and the restore made a writable array in memory, apart from the file. A map the cells write
    (``r+``, ``w+``, ``c``) holds their work: each checkpoint keeps its bytes as that cell left them, and a
    restore maps the file again and puts them back in the map, so the file holds them again (the cells' later
    writes undone with the rest of their work) and a write or ``flush()`` reaches it, as before; it came back as
    an array in memory that said it was a map of no file, where writes and ``flush()`` reached nothing. A
    copy-on-write map (``c``) leaves the file as it is."""
    order = "F" if obj.flags.f_contiguous and not obj.flags.c_contiguous else "C"
    place = (os.fspath(obj.filename), obj.dtype, obj.offset, obj.shape, order)
    if obj.mode == "r":
        return _memmap_again, place
    # The map's bytes, where numpy put them in the file's mapping: saved as bytes, not as an array's memory that a
    # lazy restore would map before verifying it, as these are written into the file.
    start = obj.offset % mmap.ALLOCATIONGRANULARITY
    return _memmap_written, (*place, obj.mode, pickle.PickleBuffer(memoryview(obj.base)[start : start + obj.nbytes]))


def _memmap_again(path: str, dtype: Any, offset: int, shape: tuple[int, ...], order: str, mode: str = "r") -> Any:
    """Map a file again, as ``_reduce_memmap`` saved its map."""
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "the file a numpy.memmap mapped is gone", path)
    numpy = sys.modules.get("numpy") or importlib.import_module("numpy")
    return numpy.memmap(path, dtype=dtype, mode=mode, offset=offset, shape=shape, order=order)


def _memmap_written(
    path: str, dtype: Any, offset: int, shape: tuple[int, ...], order: str, mode: str, data: Any
) -> Any:
    """Map a file the cells wrote through again (``r+`` for ``w+``, which would empty it), with the bytes the map
    held at the checkpoint. A copy-on-write map of a file gone is its bytes in memory: none of it reached the file."""
    if mode == "c" and not os.path.exists(path):
        numpy = sys.modules.get("numpy") or importlib.import_module("numpy")
        return numpy.ndarray(shape, dtype, buffer=bytearray(data), order=order).view(numpy.memmap)
    made = _memmap_again(path, dtype, offset, shape, order, "c" if mode == "c" else "r+")
    start = offset % mmap.ALLOCATIONGRANULARITY
    made.base[start : start + made.nbytes] = data
    made.mode = mode
    return made


def _with_attributes(array: Any, kind: type, attributes: dict[str, Any]) -> Any:
    """An array of the subclass ``kind`` (its ``__array_finalize__`` runs), with the attributes it had."""
    made = array.view(kind)
    made.__dict__.update(attributes)
    return made


def _plain_array_class(t: type, numpy: Any) -> bool:
    """Whether ``t`` is a subclass of ndarray pickled as ndarray pickles (``recarray``, ``chararray``): its
    views are then rebuilt on their base as a plain array's are."""
    ndarray = numpy.ndarray
    return issubclass(t, ndarray) and all(
        getattr(t, name) is getattr(ndarray, name) for name in ("__reduce__", "__reduce_ex__", "__setstate__")
    )


def _reduce_memoryview(obj: memoryview) -> Any:
    """A memoryview of an object as a memoryview of that object (``memoryview(data)``, sharing it), cut to the
    part it views and cast to its format and shape (``memoryview(data)[2:4]``, ``.cast("H")``); a strided one as a
    memoryview of a copy of its bytes, with its format, shape and writability (dill refuses a memoryview;
    cloudpickle saves its bytes)."""
    base = obj.obj
    castable = _castable(obj)
    with contextlib.suppress(TypeError, ValueError):  # a base that exports no buffer any more
        whole = memoryview(base)
        if (whole.nbytes, whole.format, whole.shape, whole.readonly) == (
            obj.nbytes,
            obj.format,
            obj.shape,
            obj.readonly,
        ):
            return memoryview, (base,)
        if castable and obj.c_contiguous and whole.c_contiguous:
            offset = memory.span(obj)[0] - memory.span(whole)[0]
            if 0 <= offset <= whole.nbytes - obj.nbytes:
                return _memoryview_part, (base, offset, obj.nbytes, obj.format, obj.shape, obj.readonly)
    if not castable:
        return NotImplemented
    return _memoryview_of, (obj.tobytes(), obj.format, obj.shape, obj.readonly)


def _reduce_vectorize(obj: Any) -> Any:
    """A ``numpy.vectorize`` without the ufuncs it made of its function (``frompyfunc``, on its first call with
    ``otypes``), which pickle refuses: a cache, made again on the next call. The variable was not restored."""
    # A dict of them in numpy 2; numpy 1 kept one, or None.
    cache: dict[int, Any] | None = {} if isinstance(vars(obj).get("_ufunc"), dict) else None
    return copyreg.__newobj__, (type(obj),), {**vars(obj), "_ufunc": cache}  # type: ignore[attr-defined]


def _reduce_ufunc(obj: Any) -> Any:
    """A ufunc ``np.frompyfunc`` made of a function (``frompyfunc(f, 1, 1)``) as that call: numpy pickles a ufunc by
    its name, which only its own have, and the variable was not restored. The function is the one it holds (no
    attribute shows it; the garbage collector does)."""
    numpy = sys.modules["numpy"]
    if getattr(numpy, obj.__name__, None) is obj:
        return NotImplemented  # numpy's own, by name
    held = [f for f in gc.get_referents(obj) if callable(f)]
    if len(held) != 1 or not obj.__name__.endswith(" (vectorized)"):
        return NotImplemented
    return _ufunc_of, (held[0], obj.nin, obj.nout, obj.identity)


def _ufunc_of(function: Any, nin: int, nout: int, identity: Any) -> Any:
    numpy = sys.modules.get("numpy") or importlib.import_module("numpy")
    if identity is None:  # none given (``identity=None`` would make it reorderable)
        return numpy.frompyfunc(function, nin, nout)
    return numpy.frompyfunc(function, nin, nout, identity=identity)


def _temporary_directory_class(t: type) -> bool:
    return t is getattr(sys.modules.get("tempfile"), "TemporaryDirectory", None)


def _reduce_temporary_directory(obj: Any) -> Any:
    """A ``tempfile.TemporaryDirectory`` as its directory, and whether it was cleaned up yet. pickle saved its
    finalizer dead: the restored one never removed its directory, and one whose directory was gone (removed as its
    kernel shut down, or by a cell) came back naming it."""
    state = {k: v for k, v in vars(obj).items() if k != "_finalizer"}
    return _temporary_directory, (type(obj), state, obj._finalizer.alive)


def _temporary_directory(cls: Any, state: dict[str, Any], alive: bool) -> Any:
    """The directory again, removed when the object goes as ``TemporaryDirectory`` removes its own; one cleaned up
    already as such. A directory gone since is refused with why (replay makes it again with its cells)."""
    name = state["name"]
    if alive and not os.path.isdir(name):
        raise FileNotFoundError(errno.ENOENT, "the directory a tempfile.TemporaryDirectory made is gone", name)
    made = cls.__new__(cls)
    vars(made).update(state)
    options = {"warn_message": f"Implicitly cleaning up {made!r}", "ignore_errors": state["_ignore_cleanup_errors"]}
    if "delete" in inspect.signature(cls._cleanup).parameters:  # Python 3.12: TemporaryDirectory(delete=False)
        options["delete"] = state.get("_delete", True)
    made._finalizer = weakref.finalize(made, cls._cleanup, name, **options)
    if not alive:
        made._finalizer.detach()
    return made


def _reduce_masked(obj: Any) -> Any:
    """A masked array as its data, a view of the memory it is on (the array it was made on, the masked array it
    is a slice of), with its attributes: its mask, a view too, and whether that is hard. numpy's pickling copies
    both, so a write through one no longer reached the other, and drops whether the mask is hard."""
    return _with_attributes, (obj.view(sys.modules["numpy"].ndarray), type(obj), dict(vars(obj)))


class _SharedValues:
    """The Copy-on-Write tracking (a ``BlockValuesRefs``) that pandas blocks and indexes shared before a save
    (``clean = raw.rename(...)``, ``s = raw["a"]``, ``raw.set_index("b")``), shared again once loaded.

    pandas' pickling leaves that tracking out: the blocks came back on shared memory (``_reduce_array``), each
    tracked alone, so a write to one frame changed the others and the index ``set_index`` had made. Each
    ``BlockValuesRefs`` the pickler meets is saved as a new one of these (``_reduce_block_values_refs``), which
    the pickler's memo makes one for all that shared it; the first member loaded lends it its fresh tracking,
    and the others join that.
    """

    def __init__(self) -> None:
        self.refs: Any = None

    def join(self, member: Any, attribute: str, add: str) -> None:
        """Track ``member`` (a block: its ``refs``, joined by ``add_reference``; an index: its ``_references``,
        joined by ``add_index_reference``) with the others."""
        if self.refs is None:
            self.refs = getattr(member, attribute)
        else:
            setattr(member, attribute, self.refs)
            getattr(self.refs, add)(member)


def _reduce_block_values_refs(refs: Any) -> Any:
    return _SharedValues, ()


def _block_manager(make: Callable[..., Any], args: tuple[Any, ...], state: Any, shared: list[_SharedValues]) -> Any:
    manager = make(*args)
    if state is not None:
        manager.__setstate__(state)
    for block, values in zip(manager.blocks, shared, strict=True):
        values.join(block, "refs", "add_reference")
    return manager


def _reduce_block_manager(manager: Any) -> Any:
    """A frame's or series' block manager as pandas pickles it, with what each block shares its values with."""
    if not any(block.refs.has_reference() for block in manager.blocks):
        return NotImplemented
    make, args, *rest = manager.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
    if any(part is not None for part in rest[1:]):
        return NotImplemented
    return _block_manager, (make, args, rest[0] if rest else None, [block.refs for block in manager.blocks])


def _joined_index(make: Callable[..., Any], args: tuple[Any, ...], shared: _SharedValues) -> Any:
    index = make(*args)
    shared.join(index, "_references", "add_index_reference")
    return index


def _reduce_index(index: Any) -> Any:
    """An index as pandas pickles it, with what it shares its values with (a frame's column it was set from)."""
    refs = index._references
    if refs is None or not refs.has_reference():
        return NotImplemented
    make, args, *state = index.__reduce__()
    return NotImplemented if any(part is not None for part in state) else (_joined_index, (make, args, refs))


def _reduce_frame(frame: Any) -> Any:
    """A DataFrame or Series with the attributes the notebook gave it (``df.name = "train"``), which pandas'
    ``__getstate__`` leaves out (it keeps its ``_metadata`` only): they were gone after a restore (dill's too).
    pandas' ``__setstate__`` sets every key of the state. Not what pandas sets itself (``_mgr``, an accessor it
    caches under its class attribute's name)."""
    mro = type(frame).__mro__
    own = {k: v for k, v in vars(frame).items() if not k.startswith("_") and not any(k in vars(c) for c in mro)}
    if not own:
        return NotImplemented
    reduced = frame.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
    if not isinstance(reduced, tuple) or len(reduced) < 3 or not isinstance(reduced[2], dict):
        return NotImplemented
    return (reduced[0], reduced[1], {**own, **reduced[2]}, *reduced[3:])


def _pandas_reducer(t: type) -> Callable[[Any], Any] | None:
    """The reduction of a pandas object that Copy-on-Write may track (``_SharedValues``), where pandas tracks it;
    and of a frame or series, with the attributes the notebook gave it (``_reduce_frame``)."""
    internals = sys.modules.get("pandas._libs.internals")
    refs = getattr(internals, "BlockValuesRefs", None)
    if refs is None or not hasattr(refs, "add_index_reference"):  # pandas < 2 tracks nothing
        return None
    if t is refs:
        return _reduce_block_values_refs
    managers = sys.modules.get("pandas.core.internals.managers")
    if managers is not None and issubclass(t, managers.BaseBlockManager):
        return _reduce_block_manager
    pandas: Any = sys.modules.get("pandas")
    if issubclass(t, (pandas.DataFrame, pandas.Series)):
        return _reduce_frame
    # A RangeIndex holds no values a write could change (and computes its references).
    return _reduce_index if issubclass(t, pandas.Index) and not issubclass(t, pandas.RangeIndex) else None


def _castable(view: memoryview) -> bool:
    """Whether bytes can be cast to ``view``'s format (a cast takes "d", not "<d")."""
    try:
        _memoryview_of(bytes(view.itemsize), view.format, (1,), True)
    except (TypeError, ValueError):
        return False
    return True


def _memoryview_part(
    base: Any, offset: int, nbytes: int, item_format: str, shape: tuple[int, ...], readonly: bool
) -> memoryview:
    """A memoryview of ``nbytes`` of ``base`` from ``offset``, cast to its format and shape, read-only if it was."""
    octets: Any = memoryview(base).cast("B")[offset : offset + nbytes]
    part: memoryview = octets.cast(item_format, shape)
    return part.toreadonly() if readonly and not part.readonly else part


def _memoryview_of(data: bytes, item_format: str, shape: tuple[int, ...], readonly: bool) -> memoryview:
    """A memoryview of its own copy of ``data``, cast to its format and shape, read-only if it was."""
    return _memoryview_part(data if readonly else bytearray(data), 0, len(data), item_format, shape, readonly)


def _reopen(
    path: str, mode: str, position: int | None, encoding: str | None, errors: str | None, opener: Any = open
) -> Any:
    """Open a file saved by ``_reduce_file`` again, where it was: by ``open``, or by ``opener`` (gzip's, bz2's or
    lzma's ``open``) for a compressed one."""
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "the file an open handle pointed at is gone", path)
    f = opener(path, mode) if "b" in mode else opener(path, mode, encoding=encoding, errors=errors)
    if position is not None:
        f.seek(position)
    return f


def _reduce_script_module(module: Any) -> Any:
    """A TorchScript module (``torch.jit.script(model)``, ``torch.jit.trace``) as ``torch.jit.save`` writes it, which
    is how torch saves one: pickle could not ("does not have a __getstate__ method defined"), and the variable was
    not restored. (torch deprecates TorchScript and says so at each save and load: not the user's doing.)"""
    import torch

    out = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(module, out)
    return _script_module, (out.getvalue(),)


def _script_module(data: bytes) -> Any:
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.load(io.BytesIO(data))  # type: ignore[no-untyped-call]


def _parametrized_class(t: type) -> bool:
    """The class torch makes for a module given a parametrization (``weight_norm``, ``spectral_norm``,
    ``register_parametrization``), where torch has what makes it again."""
    parametrize = sys.modules.get("torch.nn.utils.parametrize")
    return (
        parametrize is not None
        and t.__module__ == parametrize.__name__
        and t.__name__.startswith("Parametrized")
        and all(hasattr(parametrize, f) for f in ("_inject_new_class", "_inject_property"))
    )


def _reduce_parametrized(module: Any) -> Any:
    """A module given a parametrization (``torch.nn.utils.parametrizations.weight_norm(layer)``) as its own class and
    state, its parametrizations and their original tensors with it (an optimizer holding those holds them still);
    torch makes its parametrized class again as it loads. torch refuses to pickle one ("Serialization of
    parametrized modules is only supported through state_dict()"): the variable was not restored."""
    base = type(module).__bases__[0]
    return base.__new__, (base,), (dict(vars(module)), list(module.parametrizations)), None, None, _parametrize


def _parametrize(module: Any, state: tuple[dict[str, Any], list[str]]) -> None:
    from torch.nn.utils import parametrize

    attributes, names = state
    vars(module).update(attributes)
    parametrize._inject_new_class(module)
    for name in names:
        parametrize._inject_property(module, name)


def _executor_types() -> tuple[type, ...]:
    """``ThreadPoolExecutor`` and ``ProcessPoolExecutor``, those imported."""
    found = (
        getattr(sys.modules.get("concurrent.futures.thread"), "ThreadPoolExecutor", None),
        getattr(sys.modules.get("concurrent.futures.process"), "ProcessPoolExecutor", None),
    )
    return tuple(t for t in found if t is not None)


def _reduce_executor(executor: Any) -> Any:
    """A thread or process pool as a new one made with the same arguments, shut down if it was (``with
    ThreadPoolExecutor() as pool:`` leaves ``pool`` so), with no work queued and no worker started. Its queue and
    locks could not be pickled: the variable was not restored, and replay offered to run its cell again, with
    all the work that cell gave the pool."""
    kwargs = {"max_workers": executor._max_workers, "initializer": executor._initializer}
    kwargs["initargs"] = executor._initargs
    if hasattr(executor, "_thread_name_prefix"):
        kwargs["thread_name_prefix"] = executor._thread_name_prefix
        shut = executor._shutdown
    else:
        kwargs |= {"mp_context": executor._mp_context, "max_tasks_per_child": executor._max_tasks_per_child}
        shut = executor._shutdown_thread
    return _executor, (type(executor), kwargs, shut)


def _executor(cls: Any, kwargs: dict[str, Any], shut: bool) -> Any:
    executor = cls(**kwargs)
    if shut:
        executor.shutdown()
    return executor


def _pool_types() -> tuple[type, ...]:
    """multiprocessing's ``Pool`` and ``ThreadPool``, once imported."""
    pools = sys.modules.get("multiprocessing.pool")
    return () if pools is None else (pools.Pool, pools.ThreadPool)


# What a pool is made with, as it keeps it.
_POOL_ARGUMENTS = ("_processes", "_initializer", "_initargs", "_maxtasksperchild", "_ctx")


def _reduce_pool(pool: Any) -> Any:
    """A multiprocessing pool as one made again: a running one with the same arguments, its workers started anew;
    one closed or terminated (``with Pool(8) as pool: results = pool.map(f, xs)`` leaves it so) as a pool in that
    state, which runs nothing and starts no worker. pickle refuses a pool ("pool objects cannot be passed between
    processes or pickled"): the variable was not restored, and replay offered to run its cell, with all the work
    that cell gave the pool, again."""
    return _pool_again, (type(pool), {k: getattr(pool, k, None) for k in _POOL_ARGUMENTS}, pool._state)


class _Stopped:
    """The worker and task handlers of a pool made again stopped (``_pool_again``): ``pool.join()`` returns."""

    def join(self, timeout: float | None = None) -> None:
        pass


def _stop_nothing() -> None:
    """What a pool made again stopped calls as it is terminated (``_pool_again``)."""


def _pool_again(cls: Any, arguments: dict[str, Any], state: str) -> Any:
    if state == "RUN":
        names = ("processes", "initializer", "initargs", "maxtasksperchild", "context")
        kwargs = dict(zip(names, arguments.values(), strict=True))
        if cls.__name__ == "ThreadPool":
            kwargs = {k: kwargs[k] for k in names[:3]}
        return cls(**kwargs)
    pool = cls.__new__(cls)
    vars(pool).update(arguments, _state=state, _pool=[], _cache={}, _terminate=_stop_nothing)
    pool._worker_handler = pool._task_handler = pool._result_handler = _Stopped()
    return pool


# What ``np.load`` of an ``.npz`` file reads as it opens it, and sets None as it closes it.
_NPZ_OPEN = ("zip", "fid", "f")


def _reduce_npz(npz: Any) -> Any:
    """The arrays ``np.load`` opened in an ``.npz`` file, opened again at its path; closed, as it was left by ``with
    np.load(path) as data:``, closed with the names of its arrays. Neither pickled (a ``BagObj``): the variable
    was not restored, and was offered to replay. One read from a buffer is refused as before."""
    path = None if npz.zip is None else npz.zip.filename
    if npz.zip is not None and not isinstance(path, str):
        return NotImplemented
    return _npz, (type(npz), path, {k: v for k, v in vars(npz).items() if k not in _NPZ_OPEN})


def _npz(cls: Any, path: str | None, state: dict[str, Any]) -> Any:
    if path is None:
        npz = cls.__new__(cls)
        vars(npz).update(state, f=None)
        return npz
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "the .npz file np.load opened is gone", path)
    kept = {k: state[k] for k in ("allow_pickle", "pickle_kwargs", "max_header_size")}
    return cls(open(path, "rb"), own_fid=True, **kept)  # the NpzFile closes it


def _open_devnull(path: Any, flags: int) -> int:
    """An ``opener`` that opens the null device whatever ``path`` and ``flags`` ask (``x`` on a file that exists)."""
    return os.open(os.devnull, os.O_RDWR)


def _closed_file(
    name: Any, mode: str, unbuffered: bool, encoding: str | None, errors: str | None, opener: Any = None
) -> Any:
    """A closed file of the type, ``name`` and ``mode`` ``_reduce_file`` saved, made on the null device, or for a
    compressed one by ``opener`` on an empty buffer: the file at ``name`` is not opened at all."""
    if opener is None:
        f: Any = open(os.devnull, mode, 0 if unbuffered else -1, encoding, errors, opener=_open_devnull)  # noqa: SIM115
        raw = f.buffer.raw if isinstance(f, io.TextIOWrapper) else getattr(f, "raw", f)
    else:
        f = opener(io.BytesIO(), mode, encoding=encoding, errors=errors)
        raw = f.buffer if isinstance(f, io.TextIOWrapper) else f
    if opener is None or name is not None:  # only a gzip file keeps its name when closed
        raw.name = name
    f.close()
    return f


# The compressed files of the standard library, by module (whose ``open`` opens one again): class and what to call one.
_COMPRESSED = {
    "gzip": ("GzipFile", "a gzip file"),
    "bz2": ("BZ2File", "a bz2 file"),
    "lzma": ("LZMAFile", "an lzma file"),
}


def _compressed(t: type) -> str | None:
    """The module (gzip, bz2 or lzma) whose compressed file ``t`` is, if it is one."""
    module = getattr(t, "__module__", None)
    if not isinstance(module, str) or module not in _COMPRESSED:
        return None
    return module if getattr(sys.modules.get(module), _COMPRESSED[module][0], None) is t else None


def _reduce_compressed(f: Any, inner: Any, kind: str) -> Any:
    """``_reduce_file``'s reduction of a gzip, bz2 or lzma file ``inner`` (``f`` itself, or the text file over it)."""
    text = f is not inner
    encoding, errors = (f.encoding, f.errors) if text else (None, None)
    opener = sys.modules[kind].open
    if f.closed:
        try:
            reading = inner.readable()
        except ValueError:  # a closed bz2 or lzma file no longer knows, nor its path
            reading = True
        mode = ("r" if reading else "w") + ("t" if text else "b")
        return _closed_file, (vars(inner).get("name"), mode, False, encoding, errors, opener)
    if not inner.readable():
        raise pickle.PicklingError(
            f"{_COMPRESSED[kind][1]} open for writing cannot be reopened where it was: its compressed stream is"
            " unfinished"
        )
    # The file it opened on its path, not one it was given (``gzip.open(buffer)``).
    own = getattr(inner, "myfileobj", None) or (inner._fp if getattr(inner, "_closefp", False) else None)
    name = getattr(own, "name", None)
    if not isinstance(name, (str, bytes)):
        raise pickle.PicklingError(
            f"{_COMPRESSED[kind][1]} reading a file object, not a path, cannot be reopened where it was"
        )
    if kind == "lzma":  # the format and filters it reads by (a raw stream has no header that tells them)
        opener = functools.partial(opener, **getattr(getattr(inner._buffer, "raw", None), "_decomp_args", {}))
    return _reopen, (os.path.abspath(os.fsdecode(name)), "rt" if text else "rb", f.tell(), encoding, errors, opener)


def _reduce_file(f: Any) -> Any:
    """An open file is saved as its path, mode and position, and reopened there on restore.

    One opened for writing is reopened for appending (``w``, ``x`` and ``r+``
    become ``a`` or ``a+``): a restore never truncates a file. Its position is
    not asked for: ``tell`` flushes the buffer, and a forked writer would write
    the cell's pending data to the file a second time. A closed one (the ``f``
    that ``with open(p, "w") as f:`` leaves) comes back closed, with its name and
    mode, and its path untouched: dill's reduction opened it again with its mode,
    which truncated the file the cell had written.

    A gzip, bz2 or lzma file opened on a path to read, or the text file over
    one (``gzip.open(p, "rt")``), is opened again by its module's ``open`` at
    its position in the decompressed data (``_reduce_compressed``); one open
    for writing is refused: a restore could only append a second stream after
    the first one's unfinished end.
    """
    text = isinstance(f, io.TextIOWrapper)
    inner = getattr(f, "buffer", None) if text else f
    kind = _compressed(type(inner))
    if kind is not None:
        return _reduce_compressed(f, inner, kind)
    name, mode = getattr(f, "name", None), getattr(f, "mode", None)
    if not isinstance(mode, str):
        return NotImplemented
    if f.closed:
        encoding, errors = (f.encoding, f.errors) if text else (None, None)
        return _closed_file, (name, mode, isinstance(f, io.FileIO), encoding, errors)
    if isinstance(name, int):  # ``tempfile.TemporaryFile()``, ``os.fdopen(fd)``: the number means nothing elsewhere
        raise pickle.PicklingError(
            f"a file open on file descriptor {name}, not on a path (tempfile.TemporaryFile(), os.fdopen()): there is"
            " no path to reopen it at"
        )
    if not isinstance(name, str):
        return NotImplemented
    binary = "b" in mode
    if f.writable():
        mode, position = "a" + ("+" if "+" in mode else "") + ("b" if binary else ""), None
    else:
        try:
            position = f.tell()
        except OSError as e:
            if not (text and f.seekable()):
                raise
            # Python keeps no position for a text file that ``next`` or a ``for`` loop reads (nor for the
            # ``csv.reader`` over it): its cell, replayed, opens it and reads to there again.
            raise pickle.PicklingError(
                "a text file read by next() or a for loop has no position Python can tell (read it with readline()"
                " to keep it where it is)"
            ) from e
    return _reopen, (os.path.abspath(name), mode, position, f.encoding if text else None, f.errors if text else None)


_RLOCK = type(threading.RLock())
_CELLS_THREAD = threading.main_thread().ident  # read on import, in the kernel: a forked writer keeps the value
_RLOCK_STATE = re.compile(r"owner=(\d+) count=(\d+)")


def _reduce_spooled(f: Any) -> Any:
    """A ``tempfile.SpooledTemporaryFile`` still in memory, in text mode, as its text and position, made again with
    the arguments it was made with (its encoding and newline, which its text wrapper does not tell); one in binary
    mode pickles as it is. One rolled over to disk is refused, with why: its file has no path."""
    if f._rolled:
        raise pickle.PicklingError(
            "a tempfile.SpooledTemporaryFile rolled over to an unnamed file on disk (past its max_size): there is no"
            " path to reopen it at"
        )
    text = f._file
    if not isinstance(text, io.TextIOWrapper) or f.closed:
        return NotImplemented
    text.flush()  # into its own memory (a forked writer's copy of it)
    return _spooled_text, (f._max_size, f._TemporaryFileArgs, text.buffer.getvalue(), text.tell())


def _spooled_text(max_size: int, arguments: dict[str, Any], data: bytes, position: int) -> Any:
    made = tempfile.SpooledTemporaryFile(max_size, **arguments)  # noqa: SIM115  # the variable's, open
    made._file.buffer.write(data)  # type: ignore[attr-defined]
    made.seek(position)
    return made


def _reduce_context_manager(manager: Any) -> Any:
    """What ``@contextlib.contextmanager`` made of a call and a ``with`` has not entered yet (``tag = timed("fit")``,
    a decorator made of one) as that call again: its generator, not started, is the only part pickle refuses. One
    entered is refused by pickle, with its generator."""
    if inspect.getgeneratorstate(manager.gen) != inspect.GEN_CREATED:
        return NotImplemented
    return type(manager), (manager.func, manager.args, manager.kwds)


def _rlock(count: int) -> Any:
    lock = threading.RLock()
    for _ in range(count):
        lock.acquire()
    return lock


def _reduce_rlock(lock: Any) -> Any:
    """A reentrant lock is made again free, or held as often by the thread running the restore if the thread
    that runs the cells held it (a cell called ``acquire``): the thread holding it otherwise is not in the
    restored kernel. dill made a free one held by no thread, so its first ``acquire`` waited forever, and so
    did every ``threading.Condition()`` and object guarded by one."""
    state = _RLOCK_STATE.search(repr(lock))
    count = int(state[2]) if state is not None and int(state[1]) == _CELLS_THREAD else 0
    return _rlock, (count,)


@dataclass(frozen=True)
class _CellsSeen:
    """What only the thread that runs the cells sees, as it saw it when a cell last ended (``remember_cells``)."""

    context: contextvars.Context  # a copy: the value each context variable holds there
    locals: weakref.WeakKeyDictionary[Any, dict[str, Any]]  # each thread-local object's attributes there


_CELLS_SEEN: _CellsSeen | None = None
_LOCALS: weakref.WeakSet[Any] = weakref.WeakSet()  # the thread-local objects the namespace holds or a walk met


def remember_cells() -> None:
    """Note, in the thread that runs the cells as a cell ends, what only that thread sees: the value each
    ``contextvars.ContextVar`` holds in its context, and the attributes it gave each ``threading.local`` that
    the shell's namespace holds, directly or as an attribute of an instance of a notebook class it holds, or a
    checkpoint's walk in this process met (``thread_local_values``). A checkpoint taken by
    another thread (the one that waits for the kernel to go idle, and the writer it forks) keeps them as the
    cells see them: read there, a context variable had only its default and a thread-local object no
    attributes."""
    global _CELLS_SEEN
    shell = _the_shell()
    with contextlib.suppress(RuntimeError):  # a thread of the notebook's changed the namespace meanwhile
        for value in list(shell.user_ns.values()) if shell is not None else ():
            t = type(value)  # not ``isinstance``, which a dead weak proxy raises
            if issubclass(t, THREAD_LOCAL):
                _LOCALS.add(value)
            elif t.__module__ == "__main__" and t.__dictoffset__:  # ``self.local = threading.local()``
                try:  # read as C reads it: no ``__getattr__`` of the user's runs
                    attributes = list(object.__getattribute__(value, "__dict__").values())
                except Exception:  # a ``__dict__`` property of the user's may raise anything
                    continue
                _LOCALS.update(a for a in attributes if issubclass(type(a), THREAD_LOCAL))
    seen: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
    for local in list(_LOCALS):
        with contextlib.suppress(Exception):  # a subclass's own __dict__ or __hash__ may raise anything
            seen[local] = dict(vars(local))
    _CELLS_SEEN = _CellsSeen(contextvars.copy_context(), seen)


def _in_cells_thread() -> bool:
    return _CELLS_SEEN is None or threading.get_ident() == _CELLS_THREAD


THREAD_LOCAL = threading.local


def thread_local_values(local: Any) -> list[Any]:
    """The values of the attributes the cells' thread gave a ``threading.local``, as a checkpoint keeps them."""
    _LOCALS.add(local)
    with contextlib.suppress(pickle.PicklingError):
        return list(_cells_attributes(local).values())
    return []


def _cells_attributes(local: Any) -> dict[str, Any]:
    if _in_cells_thread():
        return dict(vars(local))
    assert _CELLS_SEEN is not None
    found = _CELLS_SEEN.locals.get(local)
    if found is None:
        raise pickle.PicklingError(
            "a threading.local holds its values apart for each thread, and those of the thread that runs the cells"
            " are read as a cell ends: this one was not held by a variable then"
        )
    return found


def _reduce_thread_local(local: Any) -> Any:
    """A ``threading.local`` (or a notebook subclass of it) made again with the attributes the thread that runs
    the cells gave it, which the restore's thread, that same thread, gets back. pickle refused it, and it could
    only be rebuilt by running its cells again. Other threads start without them, as they did."""
    return copyreg.__newobj__, (type(local),), _cells_attributes(local)  # type: ignore[attr-defined]


def context_value(variable: contextvars.ContextVar[Any]) -> tuple[Any, ...]:
    """The value a context variable holds in the cells' context, as a tuple of it, or an empty one if none."""
    context = contextvars.copy_context() if _in_cells_thread() else _CELLS_SEEN.context  # type: ignore[union-attr]
    return (context[variable],) if variable in context else ()


def _reduce_context_variable(variable: contextvars.ContextVar[Any]) -> Any:
    """A ``contextvars.ContextVar`` made again with its name and default, then set, in the restore's context (the
    cells'), to the value it holds in the cells' context, if any. pickle refused it: the variable, and every one
    sharing objects with it, could only be rebuilt by running its cells again."""
    try:
        default: tuple[Any, ...] = (contextvars.Context().run(variable.get),)
    except LookupError:
        default = ()
    return _context_variable, (variable.name, default), context_value(variable), None, None, _set_context_value


def _context_variable(name: str, default: tuple[Any, ...]) -> contextvars.ContextVar[Any]:
    return contextvars.ContextVar(name, default=default[0]) if default else contextvars.ContextVar(name)


def _set_context_value(variable: contextvars.ContextVar[Any], value: tuple[Any, ...]) -> None:
    if value:
        variable.set(value[0])


def _reduce_finalizer(finalizer: Any) -> Any:
    """A ``weakref.finalize`` still alive as one made again on its object, with its callback and arguments, and
    whether it runs at exit. What it calls is kept in a registry of its class, not in itself: pickled, it came
    back dead, its callback never to run. A dead one pickles as it is, dead."""
    held = finalizer.peek()
    if held is None:
        return NotImplemented
    obj, function, args, kwargs = held
    return _finalizer, (obj, function, args, kwargs or {}, finalizer.atexit)


def _finalizer(
    obj: Any, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], atexit: bool
) -> Any:
    made = weakref.finalize(obj, function, *args, **kwargs)
    made.atexit = atexit
    return made


def finalizer_holds(finalizer: Any) -> tuple[Any, ...]:
    """What an alive ``weakref.finalize`` is pickled with (``_reduce_finalizer``): its object, callback, arguments."""
    return finalizer.peek() or ()


# The threads running when this process last forked (``os.fork`` of a writer), and the process that forked: in the
# writer, every thread but its own looks stopped.
_RUNNING_AT_FORK: tuple[int, frozenset[int]] = (0, frozenset())


def _note_running_threads() -> None:
    global _RUNNING_AT_FORK
    _RUNNING_AT_FORK = (os.getpid(), frozenset(map(id, threading.enumerate())))


os.register_at_fork(before=_note_running_threads)


def _reduce_thread(thread: threading.Thread) -> Any:
    """A thread the cells started that still runs is refused, saying why: its code cannot be saved. Pickled, it
    came back saying it was alive and ran nothing (``join()`` waited forever), or, written by a forked writer,
    as finished. One not started yet, or finished, is pickled as it is; the main thread is the loading process's
    (in a writer forked by another thread, ``threading`` names that one the main thread)."""
    if isinstance(thread, threading._MainThread):  # type: ignore[attr-defined]
        return threading.main_thread, ()
    forked_from, running = _RUNNING_AT_FORK
    alive = id(thread) in running if forked_from not in (0, os.getpid()) else thread.is_alive()
    if not alive:
        return NotImplemented
    raise pickle.PicklingError(
        f"a running thread ({thread.name!r}): the code it runs cannot be saved; the cell that started it can be run"
        " again"
    )


_CSV_WRITER = type(csv.writer(io.StringIO()))
_CSV_READER = type(csv.reader(()))
_DIALECT = ("delimiter", "doublequote", "escapechar", "lineterminator", "quotechar", "quoting", "skipinitialspace")


def _reduce_csv(made: Any) -> Any:
    """A ``csv.writer`` as one made again on the object whose ``write`` it calls (a file, reopened where it was,
    for appending), and a ``csv.reader`` as one on what it reads (a file, reopened at its position), each with
    its dialect: pickle refused both, and replay ran their cells again, writing their rows again. A reader's
    ``line_num`` counts again from 0 (it cannot be set). What such a C object holds besides its dialect only the
    garbage collector sees: what it writes with, or what it reads."""
    dialect = {k: getattr(made.dialect, k) for k in (*_DIALECT, "strict")}
    held = [o for o in gc.get_referents(made) if o is not made.dialect and not isinstance(o, (type, list))]
    if len(held) != 1:
        return NotImplemented
    if type(made) is _CSV_READER:
        return _csv_made, (csv.reader, held[0], dialect)
    target = getattr(held[0], "__self__", None)  # the ``write`` of a file
    if target is None or getattr(target, "write", None) != held[0]:
        return NotImplemented
    return _csv_made, (csv.writer, target, dialect)


def _csv_made(kind: Callable[..., Any], target: Any, dialect: dict[str, Any]) -> Any:
    return kind(target, **dialect)


def _reduce_json_decoder(decoder: json.JSONDecoder) -> Any:
    """A ``json.JSONDecoder`` (or a subclass) as its attributes but the scanner made of it (``_json.Scanner``, which
    pickle refuses: the decoder was skipped), made again of it as it is loaded."""
    state = {k: v for k, v in vars(decoder).items() if k != "scan_once"}
    return copyreg.__newobj__, (type(decoder),), state, None, None, _set_json_decoder_state  # type: ignore[attr-defined]


def _set_json_decoder_state(decoder: json.JSONDecoder, state: dict[str, Any]) -> None:
    vars(decoder).update(state)
    decoder.scan_once = json.scanner.make_scanner(decoder)  # type: ignore[arg-type,attr-defined]


def dict_of(view: Any) -> Any:
    """The dict (or dict subclass) a view of ``DICT_VIEWS`` shows: the one object it refers to."""
    return gc.get_referents(view)[0]


def _reduce_dict_view(view: Any) -> Any:
    """A dict's view as that view of its dict, which the pickler saves once with every other name for it: it
    comes back live (dill saves a view of a copy)."""
    return DICT_VIEWS[type(view)], (dict_of(view),)


def _match(pattern: re.Pattern[Any], string: Any, pos: int, endpos: int, regs: tuple[tuple[int, int], ...]) -> Any:
    """The match ``_reduce_match`` saved, found again: matching is deterministic, so the same search gives it.

    It came from ``search`` or ``match`` (the first that ``finditer`` gives), a later one of ``finditer``, or
    ``fullmatch``; each keeps ``pos`` as it was. Should none give the same spans, the variable is not
    restored, with the reason, rather than given another match.
    """
    for found in pattern.finditer(string, pos, endpos):
        if found.regs == regs:
            return found
        if found.start() > regs[0][0]:
            break
    found = pattern.fullmatch(string, pos, endpos)
    if found is not None and found.regs == regs:
        return found
    raise ValueError(f"{pattern.pattern!r} gives no match at {regs[0]} in the string it matched before")


def _reduce_match(m: re.Match[Any]) -> Any:
    """A regular expression's match (which pickle refuses) as its pattern, its string and where it matched."""
    return _match, (m.re, m.string, m.pos, m.endpos, m.regs)


def _key(cmp: Callable[[Any, Any], int], obj: Any) -> Any:
    return functools.cmp_to_key(cmp)(obj)


def _reduce_key_wrapper(wrapper: Any) -> Any:
    """``functools.cmp_to_key(cmp)`` (which pickle refuses) as that call again; one of the keys it makes as
    that key of the same object. The C type shows its comparison function (and object) only to ``gc``."""
    held = [r for r in gc.get_referents(wrapper) if r is not type(wrapper)]
    return (functools.cmp_to_key, (held[0],)) if len(held) == 1 else (_key, (held[0], held[1]))


def _reduce_struct(compiled: struct.Struct) -> Any:
    """A compiled ``struct`` format (which pickle refuses) as the same compilation."""
    return struct.Struct, (compiled.format,)


# typing's named placeholders, which pickle saves as the name their module holds them under.
_TYPE_VARIABLES = frozenset(
    getattr(typing, name) for name in ("TypeVar", "ParamSpec", "TypeVarTuple", "NewType") if hasattr(typing, name)
)


def _type_variable(kind: Any, name: str, module: str, args: tuple[Any, ...], options: dict[str, Any]) -> Any:
    made = kind(name, *args, **options)
    with contextlib.suppress(AttributeError, TypeError):  # a C TypeVar (3.12) may keep the module it was made in
        made.__module__ = module
    return made


def _reduce_type_variable(obj: Any) -> Any:
    """A ``TypeVar``, ``ParamSpec``, ``TypeVarTuple`` or ``NewType`` a module holds under its name as that name; one
    made in the notebook (``T = TypeVar('T')``) as the same call. pickle saves it as ``__main__.T``, which a
    fresh kernel loading the checkpoint does not have yet: ``T``, the generic classes and aliases over it
    could not be restored."""
    module = sys.modules.get(obj.__module__)
    if module is not None and module.__name__ != "__main__" and getattr(module, obj.__name__, None) is obj:
        return NotImplemented
    if isinstance(obj, typing.NewType):
        return _type_variable, (type(obj), obj.__name__, obj.__module__, (obj.__supertype__,), {})
    options = {k: getattr(obj, f"__{k}__") for k in ("bound", "covariant", "contravariant") if hasattr(obj, f"__{k}__")}
    if getattr(obj, "__infer_variance__", False):
        options["infer_variance"] = True
    constraints = getattr(obj, "__constraints__", ())
    return _type_variable, (type(obj), obj.__name__, obj.__module__, constraints, options)


# What a Python class may define to tell pickle how to make its instances again.
_PICKLE_ARGUMENTS = ("__reduce__", "__reduce_ex__", "__getnewargs__", "__getnewargs_ex__")
_SCALARS = frozenset({str, int, float, complex, bool, bytes, type(None)})


def _made_by_base(base: type, cls: type, *args: Any) -> Any:
    return base.__new__(cls, *args)


def _binds(signature: inspect.Signature, args: tuple[Any, ...]) -> bool:
    try:
        signature.bind(*args)
    except TypeError:
        return False
    return True


def _scalar(value: Any) -> bool:
    """A value with no object in it that could lead back to its holder: a string, a number, a tuple of those."""
    t = type(value)
    return t in _SCALARS or ((t is tuple or t is frozenset) and all(map(_scalar, value)))


def _scalars_first(
    make: Callable[..., Any], args: tuple[Any, ...], scalars: dict[str, Any], slot_scalars: dict[str, Any]
) -> Any:
    """Make an instance and give it the scalar attributes its ``__hash__`` and ``__eq__`` may read, before
    pickle gives it the rest of its state (``_instance_reducer``)."""
    made = make(*args)
    if scalars:
        made.__dict__.update(scalars)
    for name, value in slot_scalars.items():
        object.__setattr__(made, name, value)
    return made


def _set_state_in_order(obj: Any, state: tuple[Any, list[str]]) -> None:
    """``_set_state``, then the instance's attributes put back in the order they had (``_split``)."""
    rest, order = state
    _set_state(obj, rest)
    attributes = obj.__dict__
    ordered = {name: attributes[name] for name in order if name in attributes}
    ordered.update(attributes)  # and after them, what else it holds (what its ``__new__`` set)
    attributes.clear()
    attributes.update(ordered)


def _split(state: Any) -> tuple[Any, ...] | None:
    """A ``__dict__`` state, or ``(dict, slots)``, as its scalars (``_scalar``) to set first, for ``__dict__``
    and for slots, the rest, and the order of its attributes where setting the scalars first moves them (else
    None); None if nothing in it could lead back to the instance (all scalars)."""
    attributes, slots = state if isinstance(state, tuple) and len(state) == 2 else (state, None)
    if not isinstance(attributes or {}, dict) or not isinstance(slots or {}, dict):
        return None
    attributes, slots = attributes or {}, slots or {}
    if all(map(_scalar, attributes.values())) and all(map(_scalar, slots.values())):
        return None
    first = {k: v for k, v in attributes.items() if _scalar(v)}
    first_slots = {k: v for k, v in slots.items() if _scalar(v)}
    rest = {k: v for k, v in attributes.items() if k not in first} or None
    rest_slots = {k: v for k, v in slots.items() if k not in first_slots}
    order = None if all(map(operator.is_, attributes, first)) else list(attributes)
    return first, first_slots, (rest, rest_slots) if rest_slots else rest, order


def _instance_reducer(t: type) -> Callable[[Any], Any] | None:
    """For instances of a class written in Python that leaves its pickling to pickle: a reduction that mends what
    pickle gets wrong with two kinds of them, or None if the class is neither.

    A ``__new__`` that requires arguments pickle does not know. pickle makes an instance again by ``t.__new__(t)``
    (``t.__new__(t, 2.5)`` for a ``float`` subclass, from the builtin's ``__getnewargs__``): with ``def
    __new__(cls, symbol)`` or ``def __new__(cls, amount, currency)`` that raised on loading, and the variable and
    its group were not restored. Such an instance is made by its builtin base's ``__new__`` (``object``'s,
    ``float``'s) with those arguments and given its state, as pickle's protocols 0 and 1 did: what ``__new__``
    set is in that state. A ``__new__`` that takes pickle's arguments is called as pickle calls it, but where
    they are the base's value (``tuple``, ``str``, ``float``: ``__getnewargs__``), which a ``__new__`` of the
    notebook's takes as something else: ``def __new__(cls, *xs)`` made ``Vector(1, 2)`` again as
    ``Vector(((1, 2),))``. Such an instance is always made by its base.

    A ``__hash__`` of Python's (``def __hash__``, a frozen dataclass's). pickle makes an instance, then its state;
    where that state leads back to a dict or set holding the instance as a key (a node whose graph maps nodes
    to indexes), pickle fills that dict while the instance is still empty, its ``__hash__`` fails ("object has
    no attribute 'name'"), and the whole group was not restored. Its scalar attributes (``_scalar``: what a hash
    reads) are given to it as it is made (``_scalars_first``), the rest after, where a ``__setstate__`` of its
    own does not need the whole state at once; then its attributes are put back in their order, where that
    moved them (``vars(node)``, a frame made of ``vars`` of such objects, its JSON).
    """
    python = [c for c in t.__mro__ if c.__flags__ & HEAP_TYPE]
    if not python or any(n in vars(c) for c in python for n in _PICKLE_ARGUMENTS):
        return None
    base = next(c for c in t.__mro__ if not c.__flags__ & HEAP_TYPE)
    hashed = isinstance(getattr(t, "__hash__", None), types.FunctionType) and not any(
        "__setstate__" in vars(c) for c in python
    )
    new = getattr(t, "__new__", None)
    signature = None
    by_value = hasattr(base, "__getnewargs__")  # pickle's arguments are the base's value
    if isinstance(new, types.FunctionType):
        with contextlib.suppress(ValueError):  # no signature to read
            signature = inspect.signature(new)
            try:
                if not by_value:
                    signature.bind(t)  # pickle's call, t.__new__(t), works for every instance
                    signature = None
            except TypeError:
                pass
    if signature is None and not hashed:
        return None
    settable = not hasattr(t, "__setstate__")  # a C base's, which pickle calls with the state and _set_state would not

    def reduce(obj: Any) -> Any:
        reduced = obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
        if not isinstance(reduced, tuple) or reduced[0] is not copyreg.__newobj__:  # type: ignore[attr-defined]
            return NotImplemented
        make, args = reduced[0], reduced[1]
        if signature is not None and (by_value or not _binds(signature, args)):
            make, args = _made_by_base, (base, *args)
        parts = _split(reduced[2]) if hashed and len(reduced) > 2 else None
        if parts is not None:
            first, first_slots, rest, order = parts
            made = (make, args, first, first_slots)
            if order is None or not settable:
                return (_scalars_first, made, rest, *reduced[3:])
            return _scalars_first, made, (rest, order), reduced[3], reduced[4], _set_state_in_order  # __newobj__'s 5
        return (make, args, *reduced[2:])  # pickle's own reduction when neither applies: not asked for twice

    return reduce


def _pickled_by_value_alone(t: type) -> bool:
    """Whether ``t`` is a notebook class whose instances have a ``__dict__`` and are pickled by a base's own
    reduction, which may make them from their value alone (``Counter``, ``defaultdict``, ``Decimal``,
    ``Fraction``), the notebook's classes defining no pickling of their own. Not an Enum's members: what they hold
    is set with the class (``_with_members``)."""
    if t.__module__ != "__main__" or not t.__dictoffset__ or isinstance(t, enum.EnumMeta):
        return False
    own = [c for c in t.__mro__ if c.__module__ == "__main__"]
    if any(n in vars(c) for c in own for n in (*_PICKLE_ARGUMENTS, "__getstate__", "__setstate__")):
        return False
    return any(n in vars(c) for c in t.__mro__[len(own) : -1] for n in ("__reduce__", "__reduce_ex__"))


def _reduce_with_attributes(obj: Any) -> Any:
    """An instance of a notebook subclass of such a type (``_pickled_by_value_alone``) with the attributes the
    notebook gave it, where its base's reduction keeps no state: they were gone after a restore (dill too).

    Where a notebook class defines ``__init__`` (``class LRU(OrderedDict): def __init__(self, capacity)``) or
    ``__new__`` (``class Bag(frozenset): def __new__(cls, *items)``), the base's reduction called it with the
    base's arguments: it failed (a missing ``capacity``, a list as an item), or took them for its own
    (``Counter``'s counts as a label) and the instance came back empty. Such an instance is made by its
    base's ``__new__`` and ``__init__``, given its attributes, then its items by the base's own methods, so that
    an overridden ``__setitem__`` (an LRU's eviction) neither runs before its attributes nor runs again."""
    reduced = obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
    if not isinstance(reduced, tuple):
        return NotImplemented
    make, args, state, listitems, dictitems = (*reduced, None, None, None)[:5]
    cls = type(obj)
    if make is cls and isinstance(state, (dict, type(None))):
        own = [c for c in cls.__mro__ if c.__module__ == "__main__"]
        if any("__init__" in vars(c) or "__new__" in vars(c) for c in own):
            base = next(c for c in cls.__mro__ if c.__module__ != "__main__")
            contents = (base, dict(vars(obj)), list(listitems or ()), list(dictitems or ()))
            return _made_by_base_init, (base, cls, args), contents, None, None, _set_state_and_items
    if state is not None or not vars(obj):
        return NotImplemented
    return make, args, dict(vars(obj)), listitems, dictitems, _set_state


def _made_by_base_init(base: Any, cls: type, args: tuple[Any, ...]) -> Any:
    obj = base.__new__(cls, *args)
    if base.__init__ is not object.__init__:
        base.__init__(obj, *args)
    return obj


def _set_state_and_items(obj: Any, contents: tuple[Any, dict[str, Any], list[Any], list[Any]]) -> None:
    base, attributes, items, pairs = contents
    obj.__dict__.update(attributes)
    for item in items:
        base.append(obj, item)
    for key, value in pairs:
        base.__setitem__(obj, key, value)


def _may_give_its_name(t: type) -> bool:
    """Whether ``t`` or a notebook class it derives from has a reduction of its own, which may name an
    instance instead."""
    notebook = (c for c in t.__mro__ if c.__module__ == "__main__")
    return any(n in vars(c) for c in notebook for n in ("__reduce__", "__reduce_ex__"))


def _reduce_named_in_notebook(obj: Any) -> Any:
    """An instance of a notebook class whose ``__reduce__`` returns its name (a singleton's ``return 'MISSING'``)
    is saved by value, as pickle saves an instance that leaves its pickling to pickle. pickle saves it as that
    name, but the name is one of the variables the restore is making: loading it failed, and its whole group,
    the class with it, was not restored."""
    reduced = obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
    if not isinstance(reduced, str):
        return reduced
    state = obj.__getstate__()
    return (copyreg.__newobj__, (type(obj),)) + (() if state is None else (state,))  # type: ignore[attr-defined]


def _closure(function: Any) -> dict[str, Any]:
    """The variables a function closes over, by name (none for anything else)."""
    code, cells = getattr(function, "__code__", None), getattr(function, "__closure__", None) or ()
    return dict(zip(code.co_freevars, (c.cell_contents for c in cells), strict=True)) if code is not None else {}


def _wrapt_function(wrapped: Any, wrapper: Any, enabled: Any) -> Any:
    import wrapt

    return wrapt.FunctionWrapper(wrapped, wrapper, enabled)


def _wrapt_decorator(wrapper: Any, enabled: Any, adapter: Any) -> Any:
    import wrapt

    return wrapt.decorator(enabled=enabled, adapter=adapter)(wrapper)


def _reduce_function_wrapper(wrapper: Any) -> Any:
    """A function decorated with ``wrapt`` as the same wrapping of the same two functions, and a decorator made
    by ``@wrapt.decorator`` as that call again (its options are in the closure ``wrapt.decorator`` made).

    The proxy says it is the function it wraps (``__class__``): cloudpickle, where dill refuses it, saved that
    function alone, and the decoration was gone after a restore, without a word. Any other wrapper (an
    adapter, a ``proxy=`` class of the notebook's) is refused, then skipped and rebuilt by replay.
    """
    import wrapt

    made = wrapper._self_wrapper
    if type(wrapper) is wrapt.FunctionWrapper:
        return _wrapt_function, (wrapper.__wrapped__, made, wrapper._self_enabled)
    if getattr(made, "__qualname__", "") == "decorator.<locals>._wrapper":
        cells = _closure(made)
        if _closure(cells.get("_build")).get("proxy") is wrapt.FunctionWrapper and {"enabled", "adapter"} <= set(cells):
            return _wrapt_decorator, (wrapper.__wrapped__, cells["enabled"], cells["adapter"])
    raise pickle.PicklingError(f"a wrapt {type(wrapper).__name__} cannot be saved as the wrapper it is")


def _reduce_weak(obj: Any) -> Any:
    """A weak container (which pickle refuses: its references cannot be pickled) as its current referents.

    Restored with the objects the checkpoint holds, it refers to them weakly again: whatever only it held
    is gone after the restore, as it would have been before.
    """
    return type(obj), (list(obj) if isinstance(obj, weakref.WeakSet) else dict(obj.items()),)


def proxied(proxy: Any) -> Any:
    """The object a ``weakref.proxy`` refers to, None once it is dead, read in C: a proxy hands every attribute
    lookup (``__class__`` too, so ``isinstance``) to its object, and raises ReferenceError once that is gone."""
    return ctypes.cast(_WEAKREF_OBJECT(ctypes.py_object(proxy)), ctypes.py_object).value


def _weak_proxy(obj: Any, calls: bool) -> Any:
    """A proxy of ``obj``; where ``obj`` is None, a dead one: of an object made for it and dropped at once."""
    if obj is None:
        return weakref.proxy((lambda: None) if calls else set())
    return weakref.proxy(obj)


def _weak_method(method: Any) -> Any:
    """A ``WeakMethod`` of ``method``; where ``method`` is None, a dead one: of an object made for it and dropped."""
    return weakref.WeakMethod(method if method is not None else _Gone().method)


class _Gone:
    def method(self) -> None:
        """What a dead ``WeakMethod`` is made of (``_weak_method``)."""


def _reduce_weak_method(ref: Any) -> Any:
    """A ``WeakMethod`` (a callback list of an observer) as one of its method, bound to its object, which the
    pickler saves once with every other name for it (the capture groups them), or a dead one. pickle refused
    it, and the object holding it was not restored."""
    return _weak_method, (ref(),)


def _reduce_weak_proxy(proxy: Any) -> Any:
    """A ``weakref.proxy`` as a proxy of its object, which the pickler saves once with every other name for it,
    or a dead one: pickle asked the object itself (a proxy forwards ``__reduce_ex__``) and saved a copy of it
    in the proxy's place, and a dead proxy raised ReferenceError, as did every ``isinstance`` on it (``type``
    is asked instead), which failed every checkpoint."""
    return _weak_proxy, (proxied(proxy), type(proxy) is weakref.CallableProxyType)


# What a Python exception class may define to pickle its instances its own way; then it is left to do so.
_OWN_PICKLING = ("__new__", *_PICKLE_ARGUMENTS)


def _exception(cls: type, args: tuple[Any, ...]) -> BaseException:
    exception: BaseException = cls.__new__(cls, *args)
    return exception


def _rebuilt_without_init(t: type) -> bool:
    """Whether an exception class's ``__init__`` may take other arguments than it keeps in ``args``.

    ``class Failed(Exception)`` with ``__init__(self, code, msg)`` calling ``super().__init__(msg)`` keeps
    ``args == (msg,)``, and pickle rebuilds it as ``Failed(msg)``, which raises: the variable, and the
    group it is in, could not be restored. Such an exception is rebuilt without ``__init__`` instead
    (``_reduce_exception``), from the same ``args`` and attributes, as it was. Only where the builtin base
    keeps nothing but ``args`` (not ``OSError``, ``ImportError``...) and the class does not pickle itself
    its own way.
    """
    base = next(c for c in t.__mro__ if c.__module__ == "builtins")
    python = t.__mro__[: t.__mro__.index(base)]
    if base.__basicsize__ != BaseException.__basicsize__ or any(n in vars(c) for c in python for n in _OWN_PICKLING):
        return False
    return any("__init__" in vars(c) for c in python)  # else calling the class with its args is right


def _reduce_exception(obj: BaseException) -> Any:
    return _exception, (type(obj), obj.args), {**obj.__dict__, **_chain(obj)} or None


def _reduce_chained(obj: BaseException) -> Any:
    """An exception as pickle saves it, with the exception it was raised from or while handling and its
    traceback, which pickle leaves out (``raise ValueError(...) from e``): its ``__setstate__`` sets them again."""
    chain = _chain(obj)
    reduced = obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL) if chain else None
    if not isinstance(reduced, tuple) or len(reduced) < 2:
        return NotImplemented
    state = reduced[2] if len(reduced) > 2 else None
    if state is not None and not isinstance(state, dict):  # a class that pickles itself its own way
        return NotImplemented
    return (reduced[0], reduced[1], {**(state or {}), **chain}, *reduced[3:])


def _chain(obj: BaseException) -> dict[str, Any]:
    chain: dict[str, Any] = {k: v for k in ("__cause__", "__context__") if (v := getattr(obj, k)) is not None}
    if obj.__suppress_context__:
        chain["__suppress_context__"] = True
    if obj.__traceback__ is not None:
        chain["__traceback__"] = _Traceback(obj.__traceback__)
    return chain


class _Raised(Exception):
    pass


_RAISE = compile("raise _Raised", "<traceback>", "exec")
# A location table (CPython 3.11's) of a line and no columns for each of ``_RAISE``'s code units, at most 8 an entry.
_NO_COLUMNS = 0x80 | 13 << 3


def _line_only(units: int) -> bytes:
    table = bytearray()
    while units > 0:
        table += bytes((_NO_COLUMNS | (min(units, 8) - 1), 0))  # the line of the one before: no change
        units -= 8
    return bytes(table)


class _Traceback:
    """An exception's traceback as the place of each of its frames: file, line, function and the line's text. The
    frames themselves (their variables reach the whole kernel) no pickler saves: the exception came back with
    ``__traceback__`` None, and ``traceback.print_exception(e)``, ``%tb`` or a log of it showed no stack.

    It comes back as a real traceback of frames at those places, without their variables, each a ``raise`` run in
    code that says it is that function at that line: ``traceback.format_exception`` and ``extract_tb`` give
    what they gave, the text of a line from a file that is gone (a cell of the kernel that ran it) too."""

    def __init__(self, traceback: types.TracebackType) -> None:
        self.places: list[tuple[str, int, str, str]] = []
        tb: types.TracebackType | None = traceback
        while tb is not None:
            code, line = tb.tb_frame.f_code, tb.tb_lineno
            self.places.append((code.co_filename, line, code.co_name, linecache.getline(code.co_filename, line)))
            tb = tb.tb_next

    def __reduce__(self) -> Any:
        return _traceback, (self.places,)


def _traceback(places: list[tuple[str, int, str, str]]) -> types.TracebackType | None:
    for filename, line, _, text in places:
        if text and not linecache.getline(filename, line):  # a file gone: its lines as they were
            entry = linecache.cache.get(filename, ())
            lines = list(entry[2]) if len(entry) == 4 else []  # not a lazy entry, (get_lines,)
            lines.extend("" for _ in range(line - len(lines)))  # lines not known stay empty
            lines[line - 1] = text
            linecache.cache[filename] = (0, None, lines, filename)
    made: types.TracebackType | None = None
    for filename, line, name, _ in reversed(places):
        code = _RAISE.replace(
            co_filename=filename,
            co_name=name,
            co_qualname=name,
            co_firstlineno=line,
            co_linetable=_line_only(len(_RAISE.co_code) // 2),
        )
        try:
            exec(code, {"_Raised": _Raised})
        except _Raised as e:
            frame = e.__traceback__.tb_next.tb_frame  # type: ignore[union-attr]
        made = types.TracebackType(made, frame, frame.f_lasti, line)
    return made


# Seen by mypy as the function it is: it would check every call as a class definition with literal arguments.
# ``rename``: the names ``namedtuple(..., rename=True)`` gave fields it refused (``_1``) are taken as they are
# (they were refused, "Field names cannot start with an underscore", and the class was not saved).
_namedtuple: Callable[..., type] = functools.partial(collections.namedtuple, rename=True)


def _namedtuple_class(
    name: str,
    fields: tuple[str, ...],
    defaults: list[Any] | None,
    module: str = "__main__",
    annotations: dict[str, Any] | None = None,
) -> type:
    cls = _namedtuple(name, fields, defaults=defaults, module=module)
    if annotations:
        cls.__new__.__annotations__ = annotations  # a typing.NamedTuple's, in its signature
    return cls


def _set_attributes(cls: type, attributes: dict[str, Any]) -> type:
    """Set a rebuilt class's attributes; ``_abc_impl`` lists the classes an ABC had registered."""
    for k, v in attributes.items():
        if k == "_abc_impl":
            for subclass in v:
                cls.register(subclass)  # type: ignore[attr-defined]
        else:
            setattr(cls, k, v)
    return cls


def _class_shell(meta: type, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> type:
    """A notebook class made again, empty, without running a hook of the notebook's.

    It is made by the library's metaclass (``type``, ``ABCMeta``), not by the notebook's ``__new__`` or
    ``__init__``, and the notebook's ``__init_subclass__`` of its bases is set aside meanwhile (the bases are
    the restored ones, not yet seen by anyone). Run again, a hook that fills a registry would find the
    registry's global not restored yet, or register the class a second time, under other bases.
    """
    hooks = {c: vars(c)["__init_subclass__"] for b in bases for c in b.__mro__ if _hooks_subclasses(c)}
    for c in hooks:
        type.__delattr__(c, "__init_subclass__")
    try:
        make = next(m for m in meta.__mro__ if m.__module__ != "__main__")
        made: type = make.__new__(meta, name, bases, namespace)
        return made
    finally:
        for c, hook in hooks.items():
            type.__setattr__(c, "__init_subclass__", hook)


def _hooks_subclasses(cls: type) -> bool:
    return cls.__module__ == "__main__" and "__init_subclass__" in vars(cls)


# The metaclasses of ``ctypes.Structure`` and ``Union``, which no import names (``_ctypes.PyCStructType``): each is
# saved as the type of the class that has it.
_CTYPES_STRUCTURES = {type(ctypes.Structure): ctypes.Structure, type(ctypes.Union): ctypes.Union}
# Made by these metaclasses (or by the notebook's, built on them), a notebook class can be rebuilt by _class_shell.
_SHELL_MAKERS = (type, abc.ABCMeta, *_CTYPES_STRUCTURES)
# Made again by _class_shell from the namespace: the rest of a class's own attributes is set after.
_SHELL_NAMESPACE = ("__module__", "__qualname__", "__slots__", "__orig_bases__")


def _reduce_notebook_class(cls: type) -> Any:
    """A notebook class as a shell and its attributes, set once it exists.

    For a class whose metaclass is the notebook's, whose notebook base defines ``__init_subclass__``, or that
    holds a descriptor with ``__set_name__`` (a field that adds itself to the class's list of fields): their
    hooks must not run again (``_class_shell``); the registry they filled is restored as it was. dill and
    cloudpickle make a class by calling its metaclass, which runs them: in a fresh kernel the hook's global
    registry was not there yet (NameError), and where it was, it got a class more. For a class with
    ``__slots__``: dill made one whose slots are private (``'__tag'``, kept as ``_Tagged__tag``) clash with
    its own member, and cloudpickle gives a slotted class a ``__dict__``. Any other class is left to the
    pickler, as are those a library's metaclass makes (an Enum's).
    """
    meta: type = type(cls)
    own = vars(cls)
    hooked = (
        meta.__module__ == "__main__"
        or any(_hooks_subclasses(c) for c in cls.__mro__[1:])
        or any(hasattr(type(v), "__set_name__") for v in own.values())
        or meta in _CTYPES_STRUCTURES  # its fields are made of ``_fields_``, set once it exists
    )
    if not (hooked or "__slots__" in own) or not all(
        m in _SHELL_MAKERS or m.__module__ == "__main__"
        for m in meta.__mro__[:-1]  # all but object
    ):
        return NotImplemented
    namespace = {k: own[k] for k in _SHELL_NAMESPACE if k in own}
    attributes = {
        k: v
        for k, v in own.items()
        if k not in namespace
        and k not in ("__dict__", "__weakref__", "_abc_impl")
        and not (type(v) is types.MemberDescriptorType and v.__objclass__ is cls)  # made from __slots__
        and type(v) is not _CTYPES_FIELD  # made from ``_fields_``
    }
    if isinstance(cls, abc.ABCMeta):
        registered = [ref() for ref in abc._get_dump(cls)[0]]  # type: ignore[attr-defined]
        attributes["_abc_impl"] = sorted((c for c in registered if c is not None), key=_name)
    return _class_shell, (meta, cls.__name__, cls.__bases__, namespace), attributes, None, None, _set_attributes


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _reduce_namedtuple(cls: type) -> Any:
    """A namedtuple class that cannot be imported by name (the notebook's, or one made with ``module=``).

    It is made again by ``namedtuple`` with its fields, defaults (None when it has none: ``__new__`` then
    has no ``__defaults__``), module and its ``__new__``'s annotations (a ``typing.NamedTuple``'s), then
    given, set afterwards (the methods may refer to the class), whatever the notebook gave it beyond what
    ``namedtuple`` makes: a ``typing.NamedTuple``'s methods, a docstring. dill would save it as its name
    and fields, without those: a ``Point`` without its ``norm()`` that never existed, or, in the kernel
    that made it, whatever the notebook names ``Point`` at that moment.
    """
    fields = cls._fields  # type: ignore[attr-defined]
    defaults = [cls._field_defaults[f] for f in fields if f in cls._field_defaults] or None  # type: ignore[attr-defined]
    plain = vars(_namedtuple(cls.__name__, fields, defaults=defaults))
    own = {
        k: v
        for k, v in vars(cls).items()
        if k not in plain or (k == "__doc__" and v != plain[k]) or getattr(v, "__module__", None) == "__main__"
    }
    own.pop("__slotnames__", None)  # copyreg's cache of the slots' names, which a namedtuple has none of
    made = (cls.__name__, fields, defaults, cls.__module__, cls.__new__.__annotations__)
    return _namedtuple_class, made, own or None, None, None, _set_attributes


def _reduce_class(cls: type) -> Any:
    """A namedtuple class that is not importable (``_reduce_namedtuple``), a pydantic generic model's class for
    its arguments, a notebook class whose hooks must not run again or that has slots
    (``_reduce_notebook_class``), ctypes's metaclass of structures as the type of ``ctypes.Structure``; any other
    class is left to the pickler."""
    if cls in _CTYPES_STRUCTURES:
        return type, (_CTYPES_STRUCTURES[cls],)
    if cls.__bases__ == (tuple,) and hasattr(cls, "_fields") and hasattr(cls, "_make"):
        return NotImplemented if _located(cls) else _reduce_namedtuple(cls)
    generic = vars(cls).get("__pydantic_generic_metadata__")
    if generic and generic["origin"] is not None:
        # ``Box[int]`` of a pydantic generic model: asked of ``Box`` again, which gives the class it keeps for it.
        return operator.getitem, (generic["origin"], generic["args"])
    return _reduce_notebook_class(cls) if cls.__module__ == "__main__" else NotImplemented


def _reduce_ctypes_made(cls: Any) -> Any:
    """An array or pointer type of ctypes, as the call that made it: ctypes gives the same class again."""
    if type(cls) is _CTYPES_MADE[0]:
        return operator.mul, (cls._type_, cls._length_)
    return ctypes.POINTER, (cls._type_,)


def _reduce_typed_dict(cls: Any) -> Any:
    """A ``TypedDict`` made in the notebook, as its metaclass makes it, with its fields and which keys it requires
    then set: its only base is ``dict``, which the metaclass refuses, so made again as any other class is made (by
    dill, cloudpickle), one that inherited its fields or was made by a call failed to load ("cannot inherit from
    both a TypedDict type and a non-TypedDict base class")."""
    if cls.__module__ != "__main__":
        return NotImplemented
    attributes = {k: v for k, v in vars(cls).items() if k not in ("__dict__", "__weakref__")}
    return _typed_dict, (type(cls), cls.__name__, {**attributes, "__qualname__": cls.__qualname__})


def _typed_dict(meta: type, name: str, attributes: dict[str, Any]) -> Any:
    made = meta(name, (), {})
    for key, value in attributes.items():
        setattr(made, key, value)
    return made


def _reduce_property(obj: property) -> Any:
    """An instance of a ``property`` subclass (a notebook's ``class classproperty(property)``), as made from its
    functions, with its attributes: ``property`` is written in C and no pickler took its subclasses (dill takes
    ``property`` itself), so the class holding one was not saved."""
    return type(obj), (obj.fget, obj.fset, obj.fdel, obj.__doc__), vars(obj) or None


def _set_state(obj: Any, state: Any) -> None:
    """What pickle does with an object's state when it has no ``__setstate__``, without asking it for one."""
    state, slots = state if isinstance(state, tuple) else (state, None)
    if state:
        obj.__dict__.update({sys.intern(k): v for k, v in state.items()})
    for k, v in (slots or {}).items():
        setattr(obj, k, v)


def _forwards(t: type) -> bool:
    """Whether a class defines ``__getattr__`` (a wrapper forwarding to ``self._inner``) and no pickling of its own.

    Loading, pickle asks the new, empty instance for ``__setstate__``; that lookup fails, reaches the
    class's ``__getattr__``, which reads ``self._inner``, which is not set yet and reaches
    ``__getattr__`` again: a RecursionError, and the instance, its class and its group are not
    restored. Its state is set by ``_set_state`` instead (``_reduce_proxy``), as pickle would, without the
    lookup. Not a metaclass's (EnumType's): its ``__getattr__`` serves classes, pickled as classes.
    """
    if not isinstance(getattr(t, "__getattr__", None), types.FunctionType) or issubclass(t, type):
        return False
    return not any(n in vars(c) for c in t.__mro__[:-1] for n in ("__setstate__", "__reduce__", "__reduce_ex__"))


def _reduce_proxy(obj: Any) -> Any:
    reduced = obj.__reduce_ex__(5)
    if not isinstance(reduced, tuple) or len(reduced) < 3 or reduced[2] is None:
        return NotImplemented
    return (*reduced, *[None] * (5 - len(reduced)), _set_state)


def _reducer(t: type) -> Callable[[Any], Any] | None:
    """Which of the reductions below applies to objects of type ``t``, if any. For a type ``_referable``
    takes, an object a library module holds is saved as that module's attribute first (``_or_library``)."""
    own = _type_reducer(t)
    return _or_library(own) if _referable(t) and t in _LIBRARY.current().types else own


def _type_reducer(t: type) -> Callable[[Any], Any] | None:
    numpy = sys.modules.get("numpy")
    if t in _FILE_TYPES or _compressed(t) is not None:
        return _reduce_file
    if t is tempfile.SpooledTemporaryFile:
        return _reduce_spooled
    if t is contextlib._GeneratorContextManager:
        return _reduce_context_manager
    if t is _RLOCK:
        return _reduce_rlock
    if t is contextvars.ContextVar:
        return _reduce_context_variable
    if t is weakref.finalize:
        return _reduce_finalizer
    if issubclass(t, threading.Thread):
        return _reduce_thread
    if t is _CSV_WRITER or t is _CSV_READER:
        return _reduce_csv
    if issubclass(t, json.JSONDecoder) and not _may_give_its_name(t):
        return _reduce_json_decoder
    if issubclass(t, THREAD_LOCAL):
        return _reduce_thread_local
    if t in WEAK_TYPES:
        return _reduce_weak
    if t in WEAK_PROXIES:
        return _reduce_weak_proxy
    if t is weakref.WeakMethod:
        return _reduce_weak_method
    if t in DICT_VIEWS:
        return _reduce_dict_view
    if t is types.ModuleType:
        return _reduce_module
    if t is _KEY_WRAPPER:
        return _reduce_key_wrapper
    if t is re.Match:
        return _reduce_match
    if t is struct.Struct:
        return _reduce_struct
    if t in _TYPE_VARIABLES:
        return _reduce_type_variable
    wrapt = sys.modules.get("wrapt")
    if wrapt is not None and issubclass(t, wrapt.FunctionWrapper):
        return _reduce_function_wrapper
    if t is _LRU_WRAPPER:
        return _reduce_notebook_wrapper
    if issubclass(t, BaseException):
        return _reduce_exception if _rebuilt_without_init(t) else _reduce_chained
    if t in _CTYPES_MADE:
        return _reduce_ctypes_made
    if t is _TYPED_DICT:
        return _reduce_typed_dict
    if issubclass(t, property) and t is not property:
        return _reduce_property
    if issubclass(t, type):
        return _reduce_class
    if numpy is not None and (t is numpy.ndarray or _plain_array_class(t, numpy)):
        return _reduce_array
    if t is memoryview:
        return _reduce_memoryview
    if numpy is not None and issubclass(t, numpy.vectorize):
        return _reduce_vectorize
    if numpy is not None and t is numpy.ufunc:
        return _reduce_ufunc
    if _temporary_directory_class(t):
        return _reduce_temporary_directory
    if numpy is not None and t is getattr(sys.modules.get("numpy.lib.npyio"), "NpzFile", None):
        return _reduce_npz
    if t in _executor_types():
        return _reduce_executor
    if t in _pool_types():
        return _reduce_pool
    masked = sys.modules.get("numpy.ma")
    if masked is not None and t is masked.MaskedArray:
        return _reduce_masked
    if t is types.MethodType:
        return _reduce_method
    if "pandas" in sys.modules and (pandas := _pandas_reducer(t)) is not None:
        return pandas
    if _shell_class(t):
        return _reduce_shell
    if _widget_class(t):
        return _reduce_widget
    if _font_class(t):
        return _reduce_font
    if _draw_class(t):
        return _reduce_draw
    if _callbacks_class(t):
        return _reduce_callbacks
    torch = sys.modules.get("torch")
    if torch is not None and issubclass(t, torch.Tensor):
        return _reduce_tensor
    if torch is not None and issubclass(t, torch.jit.ScriptModule):
        return _reduce_script_module
    if torch is not None and _parametrized_class(t):
        return _reduce_parametrized
    if _forwards(t):
        return _reduce_proxy
    if _may_give_its_name(t):
        return _reduce_named_in_notebook
    return _reduce_with_attributes if _pickled_by_value_alone(t) else _instance_reducer(t)


def _or_library(own: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    """``own`` (a type's reduction, or none), after saving an object a library module holds as its place there.
    It runs for every object of a type some library module holds that a pickler writes: one lookup, inlined."""
    library, places = _LIBRARY, _LIBRARY.places

    def reduce(obj: Any) -> Any:
        if len(sys.modules) != library.count:
            library.current()
        place = places.get(id(obj))
        # A function found by name is saved as that name by the pickler.
        if place is not None and library.holds(place, obj) and not _located(obj):
            return _attribute, place
        return NotImplemented if own is None else own(obj)

    return reduce


# The reduction for each type met, decided once: a pickler asks for every object it writes (dill for every
# int and string too). It keeps the types it has met alive (a few classes a notebook redefined, at most).
_REDUCERS: dict[type, Callable[[Any], Any] | None] = {}


def _reduce(obj: Any) -> Any:
    """The reductions every pickler here applies before its own: a library module's objects, open files, weak
    containers, cache wrappers, exceptions, classes (namedtuples, notebook classes with hooks or slots), arrays,
    forwarding wrappers."""
    t = type(obj)
    try:
        reducer = _REDUCERS[t]
    except KeyError:
        reducer = _REDUCERS[t] = _reducer(t)
    return NotImplemented if reducer is None else reducer(obj)


class _FastPickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if _in_notebook(obj) or isinstance(obj, types.ModuleType):
            raise _DefinedInNotebook
        return _reduce(obj)


_LOADING = threading.local()  # the notebook classes and functions of the group ``_join`` is loading
# Objects two streams may both hold without becoming two (``_shareable``).
_SHAREABLE = _SCALARS | {tuple, frozenset}


def _shareable(obj: Any) -> bool:
    """Whether two streams may both hold ``obj`` without making it two: immutable, or saved by name (a class, a
    library's function)."""
    if type(obj) in _SHAREABLE or isinstance(obj, type):
        return True
    return isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)) and _located(obj)


def _notebook_object(index: int) -> Any:
    notebook: list[Any] = _LOADING.notebook
    return notebook[index]


class _HybridPickler(pickle.Pickler):
    """The C pickler for a group of instances of notebook classes (a list of 100,000 records of a notebook
    class): dill, a pickler written in Python, took 42-53 us for each, this 6-8 (``benchmarks/records.py``).

    The notebook's classes and functions the group meets are saved by dill in a stream of their own, read
    first (``notebook``); each place that holds one refers to it by its index there (``_notebook_object``).
    What they hold (methods, a dataclass's fields) is in that stream: an object both streams hold would come
    back as two, so such a group (a class attribute an instance holds too) is left to dill whole (``shares``),
    as is one that holds a module.
    """

    def __init__(self, out: io.BytesIO, buffer_callback: Any) -> None:
        super().__init__(out, protocol=5, buffer_callback=buffer_callback)
        self.notebook: list[Any] = []
        self._indexes: dict[int, int] = {}

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.ModuleType):
            raise _DefinedInNotebook
        if not (isinstance(obj, type) or type(obj) is types.FunctionType) or not _notebook_module(obj):
            return _reduce(obj)
        index = self._indexes.get(id(obj))
        if index is None:
            index = self._indexes[id(obj)] = len(self.notebook)
            self.notebook.append(obj)
        return _notebook_object, (index,)

    def shares(self, notebook_memo: dict[int, Any]) -> bool:
        """Whether the notebook stream (its pickler's memo) holds a mutable object this stream holds too."""
        mutable = [obj for i, (_, obj) in notebook_memo.items() if i not in self._indexes and not _shareable(obj)]
        if not mutable:
            return False
        probe = _MemoProbe(self)
        return any(map(probe.holds, mutable))


class _NotHeld(Exception):
    pass


class _MemoProbe(pickle.Pickler):
    """Whether a C pickler's memo holds an object, without copying that memo into 300,000 Python tuples (a third of
    a group of records' pickling): this pickler takes a copy of it in C, and pickles the object alone. One in the
    memo is written as a reference to it (a GET), before anything else is asked; any other stops at its first
    part (``persistent_id``) or at its reduction (``reducer_override``), so nothing is pickled."""

    def __init__(self, of: pickle.Pickler) -> None:
        self._out = io.BytesIO()
        super().__init__(self._out, protocol=5)
        self.memo = of.memo
        self._asked: Any = None

    def persistent_id(self, obj: Any) -> None:
        if obj is not self._asked:
            raise _NotHeld

    def reducer_override(self, obj: Any) -> Any:
        raise _NotHeld

    def holds(self, obj: Any) -> bool:
        self._asked = obj
        self._out.seek(0)
        self._out.truncate()
        try:
            self.dump(obj)
        except _NotHeld:
            return False
        ops = [op.name for op, _, _ in pickletools.genops(self._out.getvalue()) if op.name not in ("PROTO", "FRAME")]
        return ops[0] in ("BINGET", "LONG_BINGET")


def _rewrap_cache(function: Any, maxsize: int | None, typed: bool) -> Any:
    """Rebuild a ``functools.lru_cache`` / ``cache`` wrapper around its (restored) function, with an empty cache."""
    return functools.lru_cache(maxsize=maxsize, typed=typed)(function)


def _reduce_notebook_wrapper(obj: Any) -> Any:
    """Save a notebook function's cache wrapper by value, not as a name the next kernel cannot find.

    An ``lru_cache`` wrapper pickles itself as a reference to its qualified name
    (``__main__.slow_sq``): a fresh kernel has no such name when the group is
    loaded. It is saved as its wrapped function and its cache parameters
    instead; the cached results are dropped.
    """
    if getattr(obj, "__module__", None) == "__main__":
        params = obj.cache_parameters()
        return _rewrap_cache, (obj.__wrapped__, params["maxsize"], params["typed"])
    return NotImplemented


_dill_save_function = dill.Pickler.dispatch[types.FunctionType]


def _save_function(pickler: Any, obj: types.FunctionType) -> None:
    """dill's way to save a function, and its ``__qualname__`` where dill leaves it out; a notebook function
    with globals of its own as ``_reduce_borrowing``.

    dill keeps a qualified name only when it differs from ``__name__``, and a function made again takes its
    code's: one that ``functools.wraps`` named ``fib`` came back as ``logged.<locals>.wrapper``, with that
    repr, and ``pickle.dumps(fib)`` failed ("Can't pickle local object"). The name is set on the rebuilt
    function (a BUILD of its slot state), as it was.
    """
    if obj.__module__ == "__main__" and obj.__globals__ is not pickler._main.__dict__:
        pickler.save_reduce(*_reduce_borrowing(obj), obj=obj)
        return
    if obj.__globals__ is pickler._main.__dict__ and obj.__module__ != "__main__":
        pickler.save_reduce(*_reduce_named_elsewhere(obj), obj=obj)
        return
    _dill_save_function(pickler, obj)
    if obj.__qualname__ != obj.__code__.co_qualname and not _located(obj):
        pickler.save((None, {"__qualname__": obj.__qualname__}))
        pickler.write(pickle.BUILD)


def _reduce_borrowing(f: types.FunctionType) -> tuple[Any, ...]:
    """A notebook function whose globals are a dict of its own, with only the globals its code names.

    attrs gives the methods it writes a copy of their module's namespace, in a kernel the notebook's as it was
    when the class was made (``get_ipython``, ``In``, every variable then): dill saved that copy whole with
    the class (8 MB beside one array of a million floats), and it failed to load. The globals are set once the
    function exists, so one that names itself comes back naming itself.
    """
    globs = f.__globals__
    held = {n: globs[n] for n in sorted(_global_names(f.__code__)) if n in globs}  # sorted: the same bytes each time
    attributes = {a: getattr(f, a) for a in _FUNCTION_ATTRIBUTES}
    return _function, (f.__code__, f.__name__, f.__defaults__, f.__closure__), (held, attributes), None, None, _fill


_FUNCTION_ATTRIBUTES = ("__qualname__", "__module__", "__doc__", "__kwdefaults__", "__annotations__", "__dict__")


def _global_names(code: types.CodeType) -> set[str]:
    """The names ``code`` and the code it nests (lambdas, comprehensions) may look up as globals."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _reduce_named_elsewhere(f: types.FunctionType) -> tuple[Any, ...]:
    """A notebook function that names a library's module as its own (``functools.wraps(json.dumps)`` copies
    ``__module__``), with the notebook's namespace as its globals, as a notebook function has. dill gave it a
    copy of the globals its code names, each pickled with it: after a restore it appended to a copy of the
    list the namespace has, and read the globals as they were when it was saved."""
    attributes = {a: getattr(f, a) for a in _FUNCTION_ATTRIBUTES}
    arguments = (f.__code__, f.__name__, f.__defaults__, f.__closure__, f.__globals__)
    return _function, arguments, ({}, attributes), None, None, _fill


def _function(
    code: types.CodeType,
    name: str,
    defaults: tuple[Any, ...] | None,
    closure: Any,
    globs: dict[str, Any] | None = None,
) -> Any:
    return types.FunctionType(code, {} if globs is None else globs, name, defaults, closure)


def _fill(f: types.FunctionType, state: tuple[dict[str, Any], dict[str, Any]]) -> None:
    held, attributes = state
    f.__globals__.update(held)
    for name, value in attributes.items():
        setattr(f, name, value)


def _save_picklebuffer(pickler: Any, obj: pickle.PickleBuffer) -> None:
    """An empty buffer (an array of no elements) in band as its own new object. pickle's Python pickler writes
    an in-band buffer's bytes as ``bytes`` it memoizes without asking the memo first: an empty one's are ``b""``,
    one object, and the second empty array of a group failed its memo's assertion (``AssertionError:``, a figure
    with an image and a colorbar)."""
    with obj.raw() as view:
        empty, readonly = view.nbytes == 0, view.readonly
    if not empty:
        pickle._Pickler.save_picklebuffer(pickler, obj)  # type: ignore[attr-defined]
    elif readonly:
        pickler.save(b"")  # through the memo
    else:
        pickler.save_bytearray(bytearray())  # a new object, which the memo keeps alive


# How dill's pickler saves these types instead of dill's own way.
_DILL_SAVERS: dict[type, Callable[[Any, Any], None]] = {
    types.FunctionType: _save_function,
    pickle.PickleBuffer: _save_picklebuffer,
}


class _Dispatch(dict):  # type: ignore[type-arg]
    """dill's table of how to save each type, as it is at each lookup (dill adds to it as it meets types), but
    for ``_DILL_SAVERS``. A pickler only ever asks it ``get``."""

    def get(self, key: type, default: Any = None) -> Any:
        return _DILL_SAVERS.get(key) or dill.Pickler.dispatch.get(key, default)


class _DillPickler(dill.Pickler):  # type: ignore[misc]
    dispatch = _Dispatch()

    def reducer_override(self, obj: Any) -> Any:
        return _reduce(obj)

    def save_global(self, obj: Any, name: str | None = None) -> None:
        """Refuse to save a notebook object as a reference: a fresh kernel could not resolve it when loading."""
        if getattr(obj, "__module__", None) == "__main__":
            raise pickle.PicklingError(
                f"{name or getattr(obj, '__qualname__', obj)!r} would be saved as a reference to the notebook"
            )
        super().save_global(obj, name)


# cloudpickle's makers of a class (an Enum) saved by value, by where their arguments hold its tracking id.
_TRACKED = {cloudpickle.cloudpickle._make_skeleton_class: 4, cloudpickle.cloudpickle._make_skeleton_enum: 5}


class _CloudPickler(cloudpickle.Pickler):  # type: ignore[misc]
    def reducer_override(self, obj: Any) -> Any:
        reduced = _reduce(obj)
        if reduced is not NotImplemented:
            return reduced
        reduced = super().reducer_override(obj)
        if type(reduced) is not tuple or reduced[0] not in _TRACKED:
            return reduced
        # cloudpickle names a class it saves by value with a random id, kept in the process that pickles it: each
        # writer is a new fork, so the same class had a new id at every checkpoint, and its group (a notebook Enum,
        # a class holding its subclasses) was written and listed as changed after cells that never touched it. A
        # class is one object within its group's stream without it, as dill's are.
        make, args, *rest = reduced
        args = (*args[: _TRACKED[make]], None, *args[_TRACKED[make] + 1 :])
        if make is cloudpickle.cloudpickle._make_skeleton_enum:
            return _with_members((make, args, *rest), obj)
        return (make, args, *rest)

    def _function_reduce(self, func: types.FunctionType) -> Any:
        """A notebook function by value, also one naming a library's function (``_notebook_module``), which
        cloudpickle found there and saved as that name."""
        return self._dynamic_function_reduce(func) if _notebook_module(func) else super()._function_reduce(func)

    def _dynamic_function_reduce(self, func: types.FunctionType) -> Any:
        """cloudpickle's reduction of a function it saves by value, but with its module's globals, as dill does
        for the notebook's. cloudpickle gives it a dict of its own, with copies of the globals it names: a
        callback a widget held appended to a list no variable held, a method read a constant as it was when
        its class was saved, and a library's method that a decorator hides from its name (a widget's
        ``_comm_changed``) brought its module's registry of every widget with it."""
        reduced = super()._dynamic_function_reduce(func)
        # A notebook function naming a library's module as its own (``_notebook_module``) has the notebook's.
        name = "__main__" if _notebook_module(func) else func.__module__
        module = sys.modules.get(name)
        if module is None or func.__globals__ is not module.__dict__ or not importable(module):
            return reduced
        _, (code, _, *rest), (attributes, slots), *_ = reduced
        slots["__globals__"] = {}
        return _function_in, (name, code, *rest), (attributes, slots), None, None, _set_function_state


def _function_in(module: str, code: types.CodeType, name: str | None, defaults: Any, closure: Any) -> Any:
    return types.FunctionType(code, importlib.import_module(module).__dict__, name, defaults, closure)


def _set_function_state(f: types.FunctionType, state: Any) -> None:
    """cloudpickle's setting of a function's state, which sets its globals' ``__builtins__`` to its own."""
    builtins = f.__globals__.get("__builtins__")
    cloudpickle.cloudpickle._function_setstate(f, state)
    if builtins is not None:
        f.__globals__["__builtins__"] = builtins


# What an Enum member holds of the Enum's own: made again with the member.
_MEMBER_OWN = frozenset({"_value_", "_name_", "__objclass__", "_sort_order_"})


def _with_members(reduced: tuple[Any, ...], cls: Any) -> tuple[Any, ...]:
    """cloudpickle's reduction of a notebook Enum, and what its members hold besides their values.

    cloudpickle makes each member again from its value alone, before the class has its methods: the
    attributes an Enum's ``__init__`` sets (the documentation's ``Planet``: ``self.mass = mass``), or a cell
    set on a member later, were gone. They are set once the class is made. Its members are made under every
    name they had.
    """
    make, args, (own, slots) = reduced[:3]
    # Every name the class gave a member: iterating it, as cloudpickle does, leaves out aliases (``CRIMSON = 1``
    # beside ``RED = 1``) and a Flag's named combinations (``RW = 3``), which were lost, or failed the class.
    # A value the class would take for a method (a function, ``@enum.member def fn``) is marked a member again: it
    # was not made, and loading the class failed on its name (KeyError).
    named = {name: _as_member(member.value) for name, member in cls._member_map_.items()}
    if _members_made_its_way(cls):
        made = {n: _EnumMember(m, cls._member_type_) for n, m in cls._member_map_.items()}
        named = {"__new__": _enum_member, "__init__": _enum_member_init, **made}
    args = (*args[:3], named, *args[4:])
    own = {k: v for k, v in own.items() if k not in named}
    members = {m.name: {k: v for k, v in vars(m).items() if k not in _MEMBER_OWN} for m in cls._member_map_.values()}
    return make, args, ((own, slots), members), None, None, _set_enum_state


def _members_made_its_way(cls: Any) -> bool:
    """Whether an Enum's members are made by a ``__new__`` of its own (the documentation's ``Coordinate(bytes,
    Enum)``, whose values are ``(0, 'P.X', 'km')``), or are of a class of the notebook's (a dataclass mixed in):
    made again from their values alone they were not the members (``3 is not a valid Coordinate``), or were not
    made (``_value_ not set in __new__``), and the class and its group failed to load. Each is then made as it
    is (``_enum_member``), and given its attributes once the class is made."""
    member_type = cls._member_type_
    return cls._new_member_ is not member_type.__new__ or member_type.__module__ != "builtins"


class _EnumMember:
    """What ``_enum_member`` makes a member of: its value and the arguments of its type's ``__new__``."""

    def __init__(self, member: Any, member_type: type) -> None:
        self.value = member._value_
        self.type = member_type if member_type.__module__ == "builtins" else object
        self.args = member_type.__getnewargs__(member) if hasattr(member_type, "__getnewargs__") else ()


def _enum_member(cls: Any, made: _EnumMember) -> Any:
    """The ``__new__`` of an Enum made again whose members are made their own way (``_members_made_its_way``)."""
    member = made.type.__new__(cls, *made.args)
    member._value_ = made.value
    return member


def _enum_member_init(member: Any, *args: Any) -> None:
    """What initializes such a member (``_enum_member``): nothing, its attributes are set once its class is made."""


def _as_member(value: Any) -> Any:
    """``value``, as an Enum's class body must give it to make it a member: a descriptor wrapped in ``enum.member``."""
    descriptor = any(hasattr(type(value), n) for n in ("__get__", "__set__", "__delete__"))
    return enum.member(value) if descriptor and hasattr(enum, "member") else value


def _set_enum_state(cls: Any, state: tuple[Any, dict[str, dict[str, Any]]]) -> Any:
    own, members = state
    cloudpickle.cloudpickle._class_setstate(cls, own)
    if vars(cls).get("__init__") is _enum_member_init:  # not the class's own
        delattr(cls, "__init__")
    for name, attributes in members.items():
        vars(cls[name]).update(attributes)
    return cls


def _buffer_sink(buffers: list[memoryview], mappable: list[bool]) -> Any:
    numpy = sys.modules.get("numpy")
    arrays = numpy.ndarray if numpy is not None else ()

    def keep(buf: pickle.PickleBuffer) -> bool:
        view = buf.raw()
        if view.nbytes < OUT_OF_BAND_MIN:
            return True  # in band
        buffers.append(view)
        mappable.append(isinstance(view.obj, arrays))
        return False

    return keep


SERIALIZERS = ("pickle", "hybrid", "dill", "cloudpickle")


def _pickler(
    serializer: str, out: io.BytesIO, buffers: list[memoryview], mappable: list[bool], module: types.ModuleType
) -> Any:
    sink = _buffer_sink(buffers, mappable)
    if serializer == "pickle":
        return _by_state(_FastPickler(out, protocol=5, buffer_callback=sink))
    if serializer == "hybrid":
        return _by_state(_HybridPickler(out, sink))
    if serializer == "dill":
        return _dill_pickler(out, module, sink)
    return _by_state(_CloudPickler(out, protocol=5, buffer_callback=sink))


def _dill_pickler(out: io.BytesIO, module: types.ModuleType, sink: Any = None) -> Any:
    pickler = _DillPickler(out, protocol=5, buffer_callback=sink)
    pickler._main = module
    return _by_state(pickler)


def _by_state(pickler: Any) -> Any:
    """``pickler``, made to leave out what the cells registered with ``copyreg`` for a notebook class
    (``copyreg.pickle(Point, reduce_point)``): such a class is saved by value, and its instances by their state.
    Through the reduction, an instance was saved as a call of the notebook's function, which a restore ran while
    the names it reads (the class itself) were not loaded yet: the class and its instances were not restored."""
    table = copyreg.dispatch_table
    if not any(isinstance(t, type) and _notebook_module(t) for t in table):
        return pickler
    own = {t: reduce for t, reduce in table.items() if not (isinstance(t, type) and _notebook_module(t))}
    chained = getattr(type(pickler), "dispatch_table", None)  # cloudpickle's: its own before copyreg's
    if isinstance(chained, collections.ChainMap):
        pickler.dispatch_table = collections.ChainMap(*(own if m is table else m for m in chained.maps))
    else:
        pickler.dispatch_table = own
    return pickler


def _unpickler(serializer: str, stream: io.BytesIO, buffers: Any, module: types.ModuleType) -> Any:
    if serializer == "dill":
        unpickler = dill.Unpickler(stream, buffers=buffers)
        unpickler._main = module
        return unpickler
    if serializer in ("pickle", "hybrid", "cloudpickle"):
        return pickle.Unpickler(stream, buffers=buffers)
    raise ValueError(f"unknown serializer {serializer!r}")


class _Segments:
    """Several variables as one pickle stream each, all sharing the pickler's memo.

    Identity across them survives (the unpickler reads the streams in order with
    one memo), and each stream is stored as a buffer of its own, chunked and
    content-addressed: when a loop variable of a notebook (``for u in users``)
    points at another record, its stream changes and the 19 MB stream of
    ``users`` beside it is not written again.
    """

    def __init__(self, serializer: str, names: list[str], segments: list[memoryview], buffers: list[memoryview]):
        self.serializer, self.names, self.segments, self.buffers = serializer, names, segments, buffers

    def __reduce__(self) -> Any:
        pieces = [[pickle.PickleBuffer(view) for view in views] for views in (self.segments, self.buffers)]
        return _join, (self.serializer, self.names, *pieces)


def _join(serializer: str, names: list[str], segments: list[Any], buffers: list[Any]) -> dict[str, Any]:
    """Read the streams of ``_Segments`` back, in order, through one unpickler (``loads`` set ``__main__``); for
    ``hybrid``, the notebook's classes and functions first (``_HybridPickler``)."""
    main = sys.modules["__main__"]
    if serializer != "hybrid":
        unpickler = _unpickler(serializer, io.BytesIO(b"".join(segments)), buffers, main)
        return {name: unpickler.load() for name in names}
    notebook, *segments = segments
    _LOADING.notebook = _unpickler("dill", io.BytesIO(notebook), None, main).load()
    try:
        unpickler = _unpickler(serializer, io.BytesIO(b"".join(segments)), buffers, main)
        return {name: unpickler.load() for name in names}
    finally:
        del _LOADING.notebook


def _order(obj: Any) -> tuple[int, int]:
    """Where a variable's stream goes in its group.

    Classes first, each after its bases and its metaclass: a class met first inside
    the state of a class it is built on (a registry) is made while that one is
    unfinished, and cloudpickle makes it twice there, keeping one. Then the largest
    containers: a record that a loop variable also points at is pickled inside its
    list, and the loop variable's own stream is a reference to it that changes alone.
    Tensors last: one made by ``torch.from_numpy`` then finds its array met (``_Memory``).
    """
    t = type(obj)  # not ``isinstance``, which asks a weak proxy for its object's class (a dead one raises)
    if issubclass(t, type):
        return 0, _depth(obj)
    torch = sys.modules.get("torch")
    if torch is not None and issubclass(t, torch.Tensor):
        return 2, 0
    return 1, -len(obj) if issubclass(t, _CONTAINERS) else 0


def _depth(cls: type) -> int:
    """How deep a class is built on the notebook's classes: its bases, its metaclass, theirs."""
    if cls.__module__ != "__main__":
        return 0
    return 1 + max(_depth(c) for c in (*cls.__bases__, type(cls)))


def _dump(serializer: str, objs: dict[str, Any], module: types.ModuleType) -> Packed:
    _PICKLING.memory = _Memory() if "torch" in sys.modules else None
    _PICKLING.exporters = {id(obj) for obj in objs.values() if type(obj) in _EXPORTERS}  # alive while ``objs`` is
    _PICKLING.variables = {id(obj) for obj in objs.values()}
    try:
        return _dump_group(serializer, objs, module)
    finally:
        _PICKLING.memory = None
        _PICKLING.exporters = _PICKLING.variables = set()


def _dump_group(serializer: str, objs: dict[str, Any], module: types.ModuleType) -> Packed:
    buffers: list[memoryview] = []
    mappable: list[bool] = []
    out = io.BytesIO()
    pickler = _pickler(serializer, out, buffers, mappable, module)
    if len(objs) == 1 and serializer != "hybrid":
        pickler.dump(objs)
        return Packed(serializer, out.getvalue(), buffers, mappable)
    names = sorted(objs, key=lambda n: _order(objs[n]))
    ends = []
    for name in names:
        pickler.dump(objs[name])
        ends.append(out.tell())
    stream = out.getbuffer()
    segments = [stream[start:end] for start, end in zip([0, *ends], ends, strict=False)]
    if serializer == "hybrid":  # the notebook's classes and functions, read first
        notebook = io.BytesIO()
        dill_pickler = _dill_pickler(notebook, module)
        dill_pickler.dump(pickler.notebook)
        if pickler.shares(dill_pickler.memo):
            raise _DefinedInNotebook
        segments.insert(0, notebook.getbuffer())
    outer_buffers: list[memoryview] = []
    outer = io.BytesIO()
    wrapper = _Segments(serializer, names, segments, buffers)
    pickle.Pickler(outer, protocol=5, buffer_callback=_buffer_sink(outer_buffers, [])).dump(wrapper)
    # The large segments (pickle streams) went out of band first, then every inner buffer, as it was.
    streams = len(outer_buffers) - len(buffers)
    return Packed(serializer, outer.getvalue(), outer_buffers, [False] * streams + mappable)


def _cache_slot_names(objs: dict[str, Any]) -> None:
    """copyreg caches ``__slotnames__`` on a class the first time it pickles an instance: cached first, a notebook
    class pickles to the same bytes whether an instance of it was pickled before or not (in the kernel, or only
    in the writer that tried one it could not pickle)."""
    for obj in objs.values():
        cls = obj if issubclass(type(obj), type) else type(obj)  # a dead weak proxy raises in ``isinstance``
        if cls.__module__ == "__main__":
            copyreg._slotnames(cls)  # type: ignore[attr-defined]


def dumps(objs: dict[str, Any], module: types.ModuleType) -> Packed:
    """Serialize a group of variables with the first pickler that can; raise NotSerializable if none can."""
    reasons: dict[str, str] = {}
    _cache_slot_names(objs)
    with as_main(module), warnings.catch_warnings():
        # dill warns where it falls back to saving a notebook class by reference ("recursive
        # self-references", "Cannot locate reference"): a failure, so the next pickler is tried.
        warnings.simplefilter("error", dill.PicklingWarning)
        # The namespace itself (``g = globals()``) is saved by dill as a reference to the loading namespace; the C
        # pickler would copy it whole.
        names = SERIALIZERS[2:] if any(obj is module.__dict__ for obj in objs.values()) else SERIALIZERS
        for name in names:
            try:
                try:
                    return _dump(name, objs, module)
                except RecursionError:  # a long linked list, a deep tree: again, with room for it
                    return _deeply(functools.partial(_dump, name, objs, module))
            except _DefinedInNotebook:
                continue
            except RecursionError:
                reasons[name] = f"too deeply nested to serialize (RecursionError at {DEEP_LIMIT:,} levels)"
            except Exception as e:  # any pickler may raise anything from a __reduce__
                reasons[name] = _reason(e)
    raise NotSerializable(_explained(reasons.get("dill") or next(iter(reasons.values())), objs))


def _reason(error: Exception) -> str:
    """An error as a reason: its type and message, or where it was raised where it has no message (an
    ``assert``), which was 'AssertionError:' alone."""
    if str(error):
        return f"{type(error).__name__}: {error}"
    tb, where = error.__traceback__, ""
    while tb is not None:
        code = tb.tb_frame.f_code
        where = f", raised at {os.path.basename(code.co_filename)} line {tb.tb_lineno} in {code.co_name}"
        tb = tb.tb_next
    return type(error).__name__ + where


# What no pickler saves, by the type pickle names (or the variable's own), and why, in a notebook user's words.
_UNSAVABLE = {
    "generator": "a generator's paused code and its local variables cannot be saved",
    "coroutine": "a coroutine's paused code and its local variables cannot be saved",
    "async_generator": "an async generator's paused code and its local variables cannot be saved",
    "_hashlib.HASH": "a hashlib hash's running state cannot be read out",
    "_hashlib.HMAC": "an hmac's running state cannot be read out",
    "pandas.io.parsers.readers.TextFileReader": "a pandas reader of chunks (read_csv(chunksize=...)) keeps its"
    " parser's place in its file, which cannot be saved",
    "socket": "a socket's live connection cannot be saved",
    "sqlite3.Connection": "a database connection is live and cannot be saved",
    "sqlite3.Cursor": "a database cursor's rows not fetched yet cannot be saved",
    "posix.DirEntry": "an os.scandir() entry cannot be made again outside its scan (its .path can)",
}
_NAMED_TYPE = re.compile(r"cannot pickle '([\w.]+)' object")


def _explained(reason: str, objs: dict[str, Any]) -> str:
    """``reason`` after what it refused is and why, where that is one of ``_UNSAVABLE``."""
    named = _NAMED_TYPE.search(reason)
    if named is not None:
        kind = named[1]
    elif len(objs) == 1:
        t = type(next(iter(objs.values())))
        kind = f"{t.__module__}.{t.__qualname__}"
    else:
        return reason
    why = _UNSAVABLE.get(kind)
    return reason if why is None else f"{why} ({reason})"


# How deep a group may nest (a linked list of 20,000 notebook objects takes about 60,000 levels of the recursion
# limit), and the stack of the thread that pickles one deeper than the default limit, which holds the C frames of
# that many levels (a few hundred bytes each); only the pages it uses are ever touched.
DEEP_LIMIT = 200_000
_DEEP_STACK = 1 << 30


def _deeply(call: Callable[[], Packed]) -> Packed:
    """``call``'s result, run in a thread with a stack of ``_DEEP_STACK`` and the recursion limit raised to
    ``DEEP_LIMIT`` meanwhile (a process-wide setting: in the kernel, only while a group that deep is pickled)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["packed"] = call()
        except BaseException as e:
            outcome["error"] = e

    limit = sys.getrecursionlimit()
    thread = threading.Thread(target=run, name="jupyter-ckpt-deep", daemon=True)
    size = threading.stack_size(_DEEP_STACK)
    sys.setrecursionlimit(max(limit, DEEP_LIMIT))
    try:
        try:
            thread.start()
        finally:
            threading.stack_size(size)  # for the threads started after it, the usual again
        thread.join()
    finally:
        sys.setrecursionlimit(limit)
    if "error" in outcome:
        raise outcome["error"]
    packed: Packed = outcome["packed"]
    return packed


def dump_with(serializer: str, objs: dict[str, Any], module: types.ModuleType) -> Packed:
    """Serialize with one named pickler, as a checkpoint recorded it was done."""
    _cache_slot_names(objs)
    with as_main(module):
        return _dump(serializer, objs, module)


@contextlib.contextmanager
def _no_collection() -> Iterator[None]:
    """Keep the cyclic garbage collector out of an unpickling.

    Every object an unpickler makes is kept, but each 700 allocations start a
    collection that traverses them, and the older ones again and again: in a
    restore of 2M small objects the collector took 1.1 s of 1.7.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def loads(packed: Packed, module: types.ModuleType) -> dict[str, Any]:
    """Rebuild a group. Callers verify the bytes before they get here."""
    with as_main(module), _no_collection():
        objs = _unpickler(packed.serializer, io.BytesIO(packed.payload), packed.buffers, module).load()
    return dict(objs)


class _Abbreviated(reprlib.Repr):
    """reprlib's short forms, also for subclasses of the built-in containers.

    reprlib has no ``repr_defaultdict``: for a ``defaultdict``, ``Counter`` or
    ``OrderedDict`` it fell back to the full ``repr``, 0.27-0.51 s for one of
    300,000 entries, at every checkpoint that held it.
    """

    def repr_instance(self, x: Any, level: int) -> str:
        for base in _CONTAINERS:
            if isinstance(x, base):
                return f"{type(x).__name__}({getattr(self, 'repr_' + base.__name__)(x, level)})"
        return super().repr_instance(x, level)


_repr = _Abbreviated()
_repr.maxstring = REPR_MAX
_repr.maxother = REPR_MAX
_repr.maxlevel = 3


def size_hint(obj: Any) -> int:
    """A cheap guess of a value's pickled size, without pickling it: an array's buffer, a frame's columns."""
    try:
        nbytes = getattr(obj, "nbytes", None)  # numpy, pandas Series, torch, xarray
        if isinstance(nbytes, int):
            return nbytes
        if hasattr(obj, "memory_usage"):  # a pandas DataFrame
            return int(obj.memory_usage(deep=False).sum())
        return sys.getsizeof(obj)
    except Exception:  # a user's property or __sizeof__ may raise anything
        return 0


def _dimension(n: Any) -> int | str:
    """One number of a shape as JSON holds it: an int (numpy's and sympy's are not), else its text (sympy's
    ``MatrixSymbol("X", n, m)`` has the symbols ``n`` and ``m``). The background writer sends the preview as
    JSON: a sympy ``Integer`` there ended it, and every checkpoint after it failed."""
    try:
        return operator.index(n)
    except TypeError:
        return str(n)


def preview(obj: Any) -> dict[str, Any]:
    """What the timeline shows of a value without unpickling it, but its size: type, shape, a short repr."""
    cls = type(obj)
    info: dict[str, Any] = {
        "type": cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    }
    for attr in ("shape", "dtype"):
        with contextlib.suppress(Exception):
            value = getattr(obj, attr)
            if value is not None and not callable(value):
                info[attr] = [_dimension(n) for n in value] if attr == "shape" else str(value)
    with contextlib.suppress(Exception):
        columns = obj.columns
        info["columns"] = [str(c) for c in list(columns)[:50]]
    if "shape" not in info and not issubclass(cls, (str, bytes)):  # a dead weak proxy raises in ``isinstance``
        with contextlib.suppress(Exception):
            info["length"] = len(obj)
    try:
        text = _repr.repr(obj)
    except Exception as e:  # a user's __repr__ may raise anything
        text = f"<repr failed: {type(e).__name__}>"
    info["repr"] = text if len(text) <= REPR_MAX else text[: REPR_MAX - 3] + "..."
    return info

"""Taking a checkpoint: from a live namespace to signed blobs and one catalog row.

The namespace is split into *groups*: variables that share an object (``b = a``,
a list inside a dict or an object as its key, a numpy view of an array, a bound
method and its object, instances of a class defined in the notebook and the class
itself) go into one group and one pickle stream, so identity survives the round
trip; every other variable is a group of its own, so a cell that changes one
variable writes one group. Groups are content-addressed, so an unchanged group
costs a hash and no write.
"""

from __future__ import annotations

import abc
import builtins
import collections
import contextlib
import contextvars
import ctypes
import gc
import os
import pickle
import platform
import random
import re
import sys
import time
import types
import weakref
from array import array as _STDLIB_ARRAY
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from . import (
    attributes,
    environment,
    loggers,
    memory,
    paths,
    registrations,
    serialize,
    settings,
    shellconfig,
    warnfilters,
)
from .blobs import BlobInfo, LocalBlobs, content_key
from .manifest import FORMAT_VERSION, Buffer, Group, Manifest, Skipped, new_uid
from .progress import Progress, Tally, untold

# Names IPython and ipykernel put in the user namespace; never user data.
MACHINERY = frozenset(
    {"In", "Out", "_", "__", "___", "_i", "_ii", "_iii", "_oh", "_ih", "_dh", "_sh", "exit", "quit"}
    | {"get_ipython", "open", "__builtins__", "__builtin__", "__name__", "__doc__", "__package__"}
    | {"__loader__", "__spec__", "__file__", "__cached__", "__annotations__"}
)
_NUMBERED = re.compile(r"^_i?\d+$")
_ATOMIC = (int, float, complex, str, bytes, bool, type(None), range)
# How the walk takes an object of each type: skipped (an atom), walked, or walked unless every pickler saves it
# as a name to import (serialize.by_reference). Decided as types are met: one lookup per object, not an
# isinstance with eight types. It keeps the types it has met alive (a few classes a notebook redefined, at most).
_ATOM, _DATA, _NAMED = 0, 1, 2  # an atom is falsy: most objects met are, and that test is the fastest
# Not walked either: what no pickler here saves (a traceback and its frames, which reach the whole kernel; a
# generator, skipped).
_UNSAVED = (types.TracebackType, types.FrameType, types.CodeType, types.GeneratorType, types.CoroutineType)
_KINDS: dict[type, int] = dict.fromkeys((*_ATOMIC, *_UNSAVED), _ATOM)
_CONTAINERS: tuple[type, ...] = (list, tuple, set, frozenset, collections.deque)
_EMPTY_TUPLE = ()
_BUILTIN_CONTAINERS = frozenset({list, tuple, set, frozenset, dict})
# What a class holds under a dunder name that is its own code: the walk follows these.
_METHODS = (types.FunctionType, classmethod, staticmethod)
# The member descriptors (slots, a C type's fields) of each instance type met, and whether the garbage
# collector shows what else it holds (``_slot_values``), filled in as types are met.
_SLOTS: dict[type, tuple[tuple[Any, ...], bool]] = {}
# Whether each instance type met is pickled by value with its instances (``_travels``), likewise.
_TRAVELS: dict[type, bool] = {}
_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE
_HAVE_GC = 1 << 14  # Py_TPFLAGS_HAVE_GC: a type whose objects may hold others
# Past this many objects reached from one variable, it is grouped with the other oversized ones.
REACH_BUDGET = 2_000_000
# Large buffers are stored in chunks of this size, each content-addressed.
CHUNK = 4 << 20
KEY_PACKAGES = ("numpy", "pandas", "torch", "sklearn", "scipy", "dill", "cloudpickle")


def is_user_variable(name: str, value: Any, hidden: Iterable[str] = ()) -> bool:
    return not (
        name in MACHINERY or name in hidden or _NUMBERED.match(name) or (name.startswith("__") and name.endswith("__"))
    )


@dataclass(frozen=True)
class Starts:
    """What the process state a checkpoint keeps as the session's changes (the working directory and import
    path, the environment variables, the warning filters, the loggers) was when jupyter-ckpt was loaded in the
    kernel."""

    paths: paths.Start
    environment: environment.Start
    filters: warnfilters.Start
    loggers: loggers.Start

    @classmethod
    def now(cls) -> Starts:
        return cls(paths.Start.now(), environment.Start.now(), warnfilters.Start.now(), loggers.Start.now())


@dataclass
class Capture:
    """The parts of a namespace that go into a checkpoint, before serialization."""

    variables: dict[str, Any]
    modules: dict[str, str]
    ids: dict[str, int] = field(default_factory=dict)
    # The random states and settings (``process_states``), taken in the kernel itself: ``random`` reseeds in a
    # forked child.
    random: dict[str, Any] = field(default_factory=dict)
    # The working directory and import path, as far as the session changed them (``paths.read``).
    paths: dict[str, Any] = field(default_factory=dict)
    # The environment variables, as far as the session changed them (``environment.read``).
    environment: dict[str, Any] = field(default_factory=dict)
    # The warning filters, as far as the session changed them (``warnfilters.read``).
    warnings: dict[str, Any] = field(default_factory=dict)
    # What the loggers are changes of: they are read by the writer (``loggers.read``, 0.1 ms with torch's 160
    # loggers), never in the kernel's pause.
    starts: Starts | None = None
    # Which variables are attributes the cells changed, with how (``attributes.read``), set again by a restore.
    attributes: dict[str, str] = field(default_factory=dict)
    # The IPython configuration lines along the session's lineage (``shellconfig.merged``), set by the
    # Checkpointer.
    configuration: list[str] = field(default_factory=list)
    # Variables left out, with why, set by the Checkpointer: those a lazy restore built on a chunk that then
    # failed its signature check, which a checkpoint would otherwise sign again as its own.
    refused: dict[str, str] = field(default_factory=dict)


def collect(
    namespace: dict[str, Any],
    hidden: Iterable[str],
    exclude: Iterable[str],
    starts: Starts | None = None,
    changed: dict[str, str] | None = None,
) -> Capture:
    """What a checkpoint keeps of ``namespace`` now; ``changed`` names the attributes of modules and imported
    classes the cells changed, with how (``attributes.merged``), kept as variables of those dotted names."""
    hidden = set(hidden) | set(exclude)
    variables: dict[str, Any] = {}
    modules: dict[str, str] = {}
    for name, value in list(namespace.items()):
        if not is_user_variable(name, value, hidden):
            continue
        # Its type, not ``isinstance``: that asks a weak proxy for its object's class, which a dead one raises.
        if issubclass(type(value), types.ModuleType) and serialize.importable(value):
            modules[name] = value.__name__  # imported again; one made in the notebook is skipped (serialize)
        else:
            variables[name] = value
    # What the cells set in a module is theirs: saved by value, here and in each variable that holds it too.
    changed = {n: how for n, how in (changed or {}).items() if n not in hidden}
    serialize.assigned_by_notebook(attributes.places(namespace, changed))
    kept = attributes.read(namespace, changed, namespace.get("__name__", ""))
    variables.update(kept)
    found = paths.read(starts.paths) if starts is not None else {}
    environ = environment.read(starts.environment) if starts is not None else {}
    warning_filters = warnfilters.read(starts.filters, namespace) if starts is not None else {}
    ids = {k: id(v) for k, v in variables.items()}
    return Capture(
        variables,
        modules,
        ids,
        process_states(),
        found,
        environ,
        warning_filters,
        starts,
        {n: changed[n] for n in kept},
    )


class _Overflow(Exception):
    pass


def _claim(owner: dict[int, str], i: int, name: str, met: set[str]) -> None:
    """Record object ``i`` as held by ``name``, or add to ``met`` the variable that held it first."""
    other = owner.setdefault(i, name)
    if other != name:
        met.add(other)


@dataclass
class _Spans:
    """Memory the walks met, while torch is imported: numpy arrays that own theirs, and storages on memory torch
    did not allocate (``torch.from_numpy``), with their variables. A storage's address is not its array's where
    the tensor was made from a view (``torch.from_numpy(a[32:])``), so they are matched by range, and only where
    such a storage was met."""

    arrays: list[Any] = field(default_factory=list)
    borrowed: list[tuple[int, int, str]] = field(default_factory=list)

    def sharing(self, owner: dict[int, str]) -> Iterator[tuple[str, str]]:
        """Pairs of variables holding a storage and the array whose memory it lies in (``owner``'s variable)."""
        if not self.borrowed:
            return
        ranges = serialize.AddressRanges()
        for array in self.arrays:
            start = array.__array_interface__["data"][0]
            ranges.add(start, start + array.nbytes, owner[id(array)])
        for lo, hi, name in self.borrowed:
            other = ranges.holding(lo, hi)
            if other is not None:
                yield name, other


def _reach(obj: Any, name: str, owner: dict[int, str], budget: int, spans: _Spans | None = None) -> set[str]:
    """Record in ``owner`` the mutable objects variable ``name`` holds; returns the variables that held one first.

    The walk stops at an object another variable holds: whatever that object
    holds is the other variable's already, and the two share a group anyway. So
    ``users`` and a ``by_name`` index of the same 300,000 dicts are walked once.
    It also stops at what every pickler saves as a name to import (a module, a
    library's class or function, an object a library module holds: ``os.environ``):
    nothing it holds is pickled, and variables sharing it need no common group.
    """
    numpy = sys.modules.get("numpy")
    torch = sys.modules.get("torch")
    met: set[str] = set()
    fresh = 0
    named = _NAMED
    stack = [obj]
    while stack:
        o = stack.pop()
        t = type(o)
        kind = _KINDS.get(t)
        if kind is None:
            kind = _kind(t)
        if not kind or (kind == named and serialize.by_reference(o)):  # an atom, or saved by name
            continue
        if o is _EMPTY_TUPLE:  # one object, written as itself: held by much of the namespace, it shares nothing
            continue
        i = id(o)
        if i in owner:  # met before, in this walk or another variable's
            _claim(owner, i, name, met)
            continue
        owner[i] = name
        fresh += 1
        if fresh > budget:
            raise _Overflow
        if t in (list, tuple, set, frozenset):
            stack.extend(o)
        elif t is dict:
            stack.extend(o.values())
            stack.extend(o.keys())  # an object may be a key, and another variable's value
        elif t in serialize.WEAK_PROXIES:  # pickled as a proxy of its object (serialize._reduce_weak_proxy)
            stack.append(serialize.proxied(o))  # before any ``isinstance``, which a dead proxy raises
        elif numpy is not None and isinstance(o, numpy.ndarray):
            base = serialize.array_root(o, numpy)
            _claim(owner, id(base), name, met)
            # On a buffer of the notebook's (``np.frombuffer(raw)``): one group, so that it is saved as a view of it.
            holder = base.base.obj if isinstance(base.base, memoryview) else base.base
            if isinstance(holder, (bytearray, bytes, _STDLIB_ARRAY)):
                stack.append(holder)
            if spans is not None:
                spans.arrays.append(base)
            if t is not numpy.ndarray:
                _claim_class(owner, t, name, met)
            if o.dtype.hasobject:
                stack.extend(_objects_in(o))
        elif torch is not None and isinstance(o, torch.Tensor):
            # Tensors on one storage (``x[2:5]``, ``x.T``, a model's weight) are pickled on it
            # (serialize._reduce_tensor): one group. A storage is known by its address, which no object has.
            if o.layout is torch.strided and o.device.type == "cpu" and not o.is_nested:
                # A tensor kind that has none; ValueError: a lazy module's parameter, not made yet.
                with contextlib.suppress(RuntimeError, NotImplementedError, ValueError):
                    storage = o.untyped_storage()
                    if storage.nbytes():
                        _claim(owner, storage.data_ptr(), name, met)
                        if spans is not None and not storage.resizable():  # on an array's memory, or a buffer's
                            spans.borrowed.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes(), name))
            _claim_class(owner, t, name, met)
            stack.extend(vars(o).values())
        elif isinstance(o, types.FunctionType):
            # Pickled by value (one found by name is passed above), with all it holds: the notebook's, and one a
            # library made (functools.singledispatch's dispatch, whose closure holds the registry of classes).
            stack.extend(o.__defaults__ or ())
            stack.extend((o.__kwdefaults__ or {}).values())
            stack.extend(o.__annotations__.values())  # the notebook's objects (``def f(a: Range(0, 9))``)
            stack.extend(vars(o).values())  # attributes: __wrapped__, a singledispatch's dispatch and register
            for cell in o.__closure__ or ():
                _claim(owner, id(cell), name, met)
                with contextlib.suppress(ValueError):  # a cell not filled yet
                    stack.append(cell.cell_contents)
        elif isinstance(o, type):
            if o.__module__ == "__main__":
                # A notebook class is pickled by value, with its notebook bases and metaclass: they must be the
                # restored ones, so they share its group, and so do the objects its own attributes hold (a
                # registry of subclasses, a ledger of instances, an ABC's registered classes). Of its dunder
                # attributes, only its methods: the others (__dataclass_fields__, __annotations__) hold the
                # machinery's objects, shared by every such class: walking them would merge them all.
                for related in (*o.__mro__[1:], type(o)):
                    if getattr(related, "__module__", None) == "__main__":
                        _claim(owner, id(related), name, met)
                stack.extend(
                    v for k, v in vars(o).items() if (not _dunder(k) and k != "_abc_impl") or isinstance(v, _METHODS)
                )
                if isinstance(o, abc.ABCMeta):
                    # Its registered classes, not its caches (``_abc_impl``), which any ``isinstance`` fills (a
                    # pickling's too): walked, they joined the classes an ABC had been asked about into its group.
                    stack.extend(ref() for ref in abc._get_dump(o)[0])  # type: ignore[attr-defined]
        elif t in serialize.WEAK_TYPES:  # pickled as its referents (serialize._reduce_weak): they share a group
            stack.extend(list(o) if t is weakref.WeakSet else [*o.keys(), *o.values()])
        elif t is types.MethodType or t is types.BuiltinMethodType:  # its object is one another variable may hold
            stack.append(o.__self__)
        elif t is memoryview:  # pickled as a view of its object (serialize._reduce_memoryview)
            with contextlib.suppress(ValueError):  # released
                stack.append(o.obj)
        elif t in serialize.DICT_VIEWS:  # pickled as a view of its dict (serialize._reduce_dict_view)
            stack.append(serialize.dict_of(o))
        elif t is weakref.ref or t is weakref.WeakMethod:  # pickled as a reference to its object (or method): that
            stack.append(o())  # object's holder must share its stream
        elif t is weakref.finalize:  # pickled with its object, callback and arguments, which its class keeps
            stack.extend(serialize.finalizer_holds(o))
        elif t is contextvars.ContextVar:  # pickled with its default and its value in the cells' context
            stack.extend(serialize.context_value(o))
        elif issubclass(t, serialize.THREAD_LOCAL):  # pickled with the attributes the cells' thread gave it
            _claim_class(owner, t, name, met)
            stack.extend(serialize.thread_local_values(o))
        else:
            _claim_class(owner, t, name, met)
            stack.extend(_contents(o))
            state = getattr(o, "__dict__", None)
            if isinstance(state, dict):
                stack.extend(state.values())
            stack.extend(_slot_values(o, t))
    return met


def _claim_class(owner: dict[int, str], t: type, name: str, met: set[str]) -> None:
    """An instance travels with its class where the class is pickled by value (``_travels``): one group."""
    travels = _TRAVELS.get(t)
    if travels is None:
        travels = _travels(t)
    if travels:
        _claim(owner, id(t), name, met)


def _kind(t: type) -> int:
    kind = _KINDS.get(t)
    if kind is None:
        if issubclass(t, _ATOMIC) and t.__flags__ & _IMMUTABLE_TYPE:
            # Not a subclass written in Python (``class Money(float)``, an IntEnum): it is pickled with its class
            # and attributes, which other variables may share.
            kind = _ATOM
        elif _plain_dtype(t):
            kind = _ATOM
        elif t not in _BUILTIN_CONTAINERS and serialize.may_be_by_reference(t):
            kind = _NAMED
        else:
            kind = _DATA
        _KINDS[t] = kind
    return kind


def _plain_dtype(t: type) -> bool:
    """A pandas dtype without parameters (``Int64Dtype``, ``BooleanDtype``): its instances are all equal, and pandas
    hands out one of them to every nullable column, which joined every such frame of a notebook into one group
    (each change pickled them all again). So does numpy its ``dtype('float64')`` to every array, which a Series
    caches once its dtype was read. Such a dtype is pickled with each variable, as an atom is. A dtype with
    parameters (a ``CategoricalDtype``'s categories, a structured dtype's field names) is walked: shared, it
    stays shared."""
    numpy = sys.modules.get("numpy")
    if numpy is not None and issubclass(t, numpy.dtype):
        return t is not type(numpy.dtype([]))  # a structured dtype: names a cell may set (``dt.names = ...``)
    base = getattr(sys.modules.get("pandas.core.dtypes.base"), "ExtensionDtype", None)
    return base is not None and issubclass(t, base) and not getattr(t, "_metadata", ())


def _travels(t: type) -> bool:
    """Whether the class of an instance is pickled by value with it: a class written in Python (a type of C is
    immutable) that no import finds, the notebook's or a namedtuple made with ``module='geo'``."""
    travels = _TRAVELS[t] = not t.__flags__ & _IMMUTABLE_TYPE and not serialize.by_reference(t)
    return travels


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _objects_in(a: Any) -> list[Any]:
    """The objects an array of objects holds, a structured array's object fields too, but the atoms: a column
    of 2M strings adds nothing to walk, and is only looked at (``set(map(type, ...))``: 20 ms)."""
    if a.dtype.names:
        return [x for n in a.dtype.names if a.dtype[n].hasobject for x in _objects_in(a[n])]
    items = a.ravel().tolist()
    kinds = {t: _kind(t) for t in set(map(type, items))}
    return [x for x in items if kinds[type(x)]] if any(kinds.values()) else []


def _slot_values(o: Any, t: type) -> list[Any]:
    """What an instance holds outside its ``__dict__``: the values of its ``__slots__`` and of the members of a
    type written in C (a ``partial``'s function and arguments, a ``property``'s functions), read through their
    member descriptors, and what else a C type that is not a container holds (an XML element's children, the
    list an iterator walks), as the garbage collector sees it (C code: no property or ``__getattr__`` of the
    user's runs)."""
    known = _SLOTS.get(t)
    if known is None:
        descriptors = tuple(
            d
            for c in t.__mro__
            for d in vars(c).values()
            if type(d) is types.MemberDescriptorType and d.__objclass__ is c
        )
        opaque = (
            bool(t.__flags__ & _HAVE_GC)
            and not issubclass(t, (dict, *_CONTAINERS))
            and (not t.__flags__ & serialize.HEAP_TYPE or any(map(_has_c_fields, t.__mro__)))
            and not _block_manager(t)  # its arrays and axes are read (``_contents``), not its blocks' bookkeeping
        )
        known = _SLOTS[t] = descriptors, opaque
    descriptors, opaque = known
    held = gc.get_referents(o) if opaque else []
    for descriptor in descriptors:
        with contextlib.suppress(AttributeError):  # a slot never set
            held.append(descriptor.__get__(o, t))
    return held


def _has_c_fields(c: type) -> bool:
    """Whether class ``c`` adds fields of C to its instances that no member descriptor reads: a base of Cython
    (pandas' ``NDArrayBacked``, whose ``Categorical`` keeps its dtype there, made a heap type as a class statement
    makes one), or of C. A class statement adds only ``__slots__`` (one pointer each), a ``__dict__`` and a
    ``__weakref__``; a class that adds either of those two is taken as one."""
    base = c.__base__
    if base is None or c.__dictoffset__ or c.__weakrefoffset__:
        return False
    slots = sum(1 for d in vars(c).values() if type(d) is types.MemberDescriptorType and d.__objclass__ is c)
    return c.__basicsize__ > base.__basicsize__ + slots * ctypes.sizeof(ctypes.c_void_p)


def _contents(o: Any) -> list[Any]:
    """What an instance of a container subclass holds (a defaultdict and its factory, an OrderedDict, a
    namedtuple, a deque, a list subclass), read through the built-in type's own methods: an override of
    ``__iter__`` or ``values`` is user code, and the walk runs none. And the arrays and axes of a pandas
    frame or series, which its block manager keeps in C fields."""
    if isinstance(o, dict):
        held = [*dict.values(o), *dict.keys(o)]
        return [*held, o.default_factory] if isinstance(o, collections.defaultdict) else held
    for base in _CONTAINERS:
        if isinstance(o, base):
            iterate: Callable[[Any], Iterable[Any]] = base.__iter__  # type: ignore[attr-defined]
            return list(iterate(o))
    if _block_manager(type(o)):
        return [*o.arrays, *o.axes]
    return []


def _block_manager(t: type) -> bool:
    manager = getattr(sys.modules.get("pandas.core.internals.managers"), "BaseBlockManager", None)
    return manager is not None and issubclass(t, manager)


class Partition:
    """Names joined into groups (a union-find): ``join`` two names' groups, then read the ``groups``."""

    def __init__(self, names: Iterable[str]) -> None:
        self._parent = {n: n for n in names}

    def _root(self, n: str) -> str:
        while self._parent[n] != n:
            self._parent[n] = self._parent[self._parent[n]]
            n = self._parent[n]
        return n

    def join(self, a: str, b: str) -> None:
        self._parent[self._root(a)] = self._root(b)

    def groups(self, order: Iterable[str]) -> list[list[str]]:
        """Each group's names in ``order``, the groups in the order of their first names."""
        found: dict[str, list[str]] = {}
        for n in order:
            found.setdefault(self._root(n), []).append(n)
        return list(found.values())


def group(
    variables: dict[str, Any], budget: int = REACH_BUDGET, namespace: dict[str, Any] | None = None
) -> list[list[str]]:
    """Partition variable names so that variables sharing any object are in one group. The walk does not enter
    the ``namespace`` itself (``g = globals()``), which is saved as a reference to the namespace (dill), nor the
    builtins' dict, which ``exec(source, ns)`` puts in ``ns``: it holds what IPython put there, and joined every
    such ``ns`` with the variables sharing any of that, into a group that could not be pickled whole."""
    partition = Partition(variables)
    owner: dict[int, str] = {id(vars(builtins)): _NAMESPACE}
    if namespace is not None:
        owner[id(namespace)] = _NAMESPACE
    oversized: str | None = None
    spans = _Spans() if "torch" in sys.modules else None
    for name in sorted(variables):
        try:
            met = _reach(variables[name], name, owner, budget, spans)
        except Exception:  # _Overflow, or what no walk expected of an object: one variable never stops a checkpoint
            # Too big to trace, or holding an object the walk could not read: keep all such variables together,
            # which is always correct.
            if oversized is not None:
                partition.join(name, oversized)
            oversized = name
            continue
        met.discard(_NAMESPACE)
        for other in met:
            partition.join(name, other)
    for name, other in spans.sharing(owner) if spans is not None else ():
        partition.join(name, other)
    return partition.groups(sorted(variables))


def sharing(
    holders: dict[str, Any], others: dict[str, Any], namespace: dict[str, Any], budget: int = REACH_BUDGET
) -> tuple[set[str], list[list[str]]] | None:
    """Which of ``others`` one of ``holders`` holds, and all their names in groups of those that share objects, as
    ``group`` makes them (an optimizer, the model whose parameters it holds, the scheduler holding the optimizer);
    None where a walk cannot finish. The walk does not enter ``namespace``."""
    owner: dict[int, str] = {id(vars(builtins)): _NAMESPACE, id(namespace): _NAMESPACE}
    partition = Partition([*holders, *others])
    held: set[str] = set()
    try:
        for variables in (holders, others):
            for name, value in variables.items():
                if variables is others and id(value) in owner:
                    held.add(name)
                for other in _reach(value, name, owner, budget) - {_NAMESPACE}:
                    partition.join(name, other)
    except Exception:  # _Overflow, or an object the walk could not read (``group``)
        return None
    return held, partition.groups([*holders, *others])


RANDOM = "random streams"  # how the timeline's changed column names the global random states
_NAMESPACE = ""  # the owner ``group`` records for the namespace: no variable has that name


def process_states() -> dict[str, Any]:
    """What a checkpoint keeps of the process beside the variables: the global random streams (Python's, and
    numpy's and torch's CPU one if imported), and the settings of the libraries imported (``settings.read``:
    matplotlib's rcParams, pandas' options, ...)."""
    states: dict[str, Any] = {"random": random.getstate()}
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        states["numpy"] = numpy.random.get_state()
    torch = sys.modules.get("torch")
    if torch is not None:
        with contextlib.suppress(Exception):  # torch half imported, or built without numpy: its stream is not kept
            states["torch"] = torch.get_rng_state().numpy().tobytes()  # bytes: loaded in a kernel without torch
    states["settings"] = settings.read()
    return states


_STREAMS = ("random", "numpy", "torch")  # the global random streams among ``process_states``


def streams_digest(states: dict[str, Any]) -> str:
    """A digest of the global random streams alone: what tells whether a cell drew from one (``link``), which
    the states' blob, holding the settings too, cannot (a setting's value serialized on its own may not come
    out as the same bytes in another kernel)."""
    return content_key(pickle.dumps([states.get(k) for k in _STREAMS], protocol=5))


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in KEY_PACKAGES:
        mod = sys.modules.get(name)
        if mod is not None:
            found[name] = str(getattr(mod, "__version__", "?"))
    return found


@dataclass
class Meta:
    """What the caller knows about the moment of the checkpoint."""

    session: str
    cell: int | None
    last_cell: int | None
    trigger: str
    status: str
    message: str | None = None
    tag: str | None = None
    at: float = field(default_factory=time.time)


# Store one blob: its bytes, whether to try compressing them, and the size of the array items they hold.
Put = Callable[[bytes | memoryview, bool, int], BlobInfo]
# Told each out-of-band buffer stored, with its chunk keys (``writewatch.observed``).
Hashed = Callable[[memoryview, list[str]], None]
# Told each chunk of an array's memory once it is stored and nothing of the checkpoint reads it again (``pack``).
Spent = Callable[[memoryview], None]


def hash_only(data: bytes | memoryview, compress: bool, itemsize: int) -> BlobInfo:
    """A ``Put`` that stores nothing: what ``diff`` uses to describe the live namespace."""
    view = memoryview(data).cast("B")
    return BlobInfo(content_key(view), view.nbytes, view.nbytes, new=False)


def _put_buffer(
    put: Put,
    buf: memoryview,
    itemsize: int,
    blobs: dict[str, BlobInfo],
    tally: Tally,
    hashed: Hashed | None = None,
    spent: Spent | None = None,
) -> Buffer:
    """Store one out-of-band buffer (of items of ``itemsize`` bytes) as content-addressed chunks; returns its
    size and chunk keys. ``spent`` is told each chunk once it is stored.

    A cell that changes a few rows of a large array writes the chunks those rows
    fall in, not the array. Whether chunks are compressed is decided on the first
    one (stored in fewer bytes than it holds): random doubles do not compress and
    are kept raw, page-aligned.
    """
    view = buf.cast("B") if buf.format != "B" or buf.ndim != 1 else buf

    def store(start: int, compress: bool) -> BlobInfo:
        chunk = view[start : start + CHUNK]
        info = put(chunk, compress, itemsize)
        if spent is not None:
            spent(chunk)
        return info

    first = store(0, True)
    tally.add(first.size)
    compress = first.stored < first.size
    # Hashing, compressing, signing and writing release the GIL: chunks go through on every core, and
    # twice as many threads as cores keep the cores busy while one syncs its batch's files (``blobs.Batch``).
    chunks = [first]
    with ThreadPoolExecutor(max_workers=2 * (os.cpu_count() or 1)) as pool:
        for info in pool.map(lambda start: store(start, compress), range(CHUNK, view.nbytes, CHUNK)):
            chunks.append(info)
            tally.add(info.size)  # here, in the thread that saves: a progress display is the kernel's
    for info in chunks:
        blobs[info.key] = info
    keys = [info.key for info in chunks]
    if hashed is not None:
        hashed(view, keys)
    return {"size": view.nbytes, "chunks": keys}


# An array's memory whose storing waits until every group is pickled: its group's buffer list, its place there.
_Waiting = tuple[list[Buffer], int, memoryview]


def _put_group(
    put: Put,
    packed: serialize.Packed,
    blobs: dict[str, BlobInfo],
    tally: Tally,
    waiting: list[_Waiting],
    hashed: Hashed | None = None,
) -> tuple[str, list[Buffer]]:
    """Store a group's stream and the buffers its pickler made; an array's memory is added to ``waiting``
    (``_put_waiting``), its place kept in the buffers returned."""
    buffers: list[Buffer] = []
    for buf, mappable in zip(packed.buffers, packed.mappable, strict=True):
        if mappable:
            waiting.append((buffers, len(buffers), buf))
            buffers.append({"size": buf.nbytes, "chunks": []})  # stored by ``_put_waiting``
        else:
            buffers.append(_put_buffer(put, buf, 1, blobs, tally, hashed))
    info = put(packed.payload, True, 1)
    blobs[info.key] = info
    tally.add(info.size)
    return info.key, buffers


def _put_waiting(
    put: Put,
    waiting: list[_Waiting],
    blobs: dict[str, BlobInfo],
    tally: Tally,
    hashed: Hashed | None = None,
    spent: Spent | None = None,
) -> None:
    """Store the arrays' memory ``waiting``, in order, each at its place; ``spent`` is told the chunks of those
    that share no byte with another (which would read them again)."""
    alone = _apart([buf for _, _, buf in waiting]) if spent is not None else frozenset()
    for buffers, place, buf in waiting:
        # The exporter is the array, whose items are shuffled before compression.
        itemsize = getattr(buf.obj, "itemsize", 1)
        stored = _put_buffer(put, buf, itemsize, blobs, tally, hashed, spent if id(buf) in alone else None)
        buffers[place] = {**stored, "mappable": True}


def _apart(views: list[memoryview]) -> frozenset[int]:
    """The buffers (by ``id``) whose bytes no other of ``views`` shares."""
    spans = sorted((*memory.span(v), id(v)) for v in views)
    alone = set()
    reach = -1  # the furthest end of the spans before
    for n, (start, end, i) in enumerate(spans):
        if start >= reach and (n + 1 == len(spans) or spans[n + 1][0] >= end):
            alone.add(i)
        reach = max(reach, end)
    return frozenset(alone)


def group_key(key: str, buffers: list[Buffer]) -> str:
    """One short key for a group's whole content: its stream and every chunk."""
    return content_key("+".join([key, *(k for b in buffers for k in b["chunks"])]).encode())


def blob_keys(manifest: Manifest) -> list[str]:
    """Every blob a manifest references."""
    entries = [*manifest["groups"], manifest["random"]]
    return [k for e in entries for k in [e["key"], *(c for b in e["buffers"] for c in b["chunks"])]]


def blob_sizes(manifest: Manifest) -> dict[str, int]:
    """The bytes each blob of a manifest holds, for those whose length it records: every chunk of a buffer, and a
    stream whose length capture recorded (``Group.size``). A blob file longer than it holds is refused unread."""
    sizes: dict[str, int] = {}
    for entry in [*manifest["groups"], manifest["random"]]:
        if "size" in entry:
            sizes[entry["key"]] = entry["size"]
        for buffer in entry["buffers"]:
            sizes.update((key, min(CHUNK, buffer["size"] - i * CHUNK)) for i, key in enumerate(buffer["chunks"]))
    return sizes


def pack(
    module: types.ModuleType,
    capture: Capture,
    put: Put,
    tally: Tally | None = None,
    hints: dict[str, int] | None = None,
    hashed: Hashed | None = None,
    spent: Spent | None = None,
) -> tuple[list[Group], dict[str, dict[str, Any]], dict[str, Skipped], dict[str, BlobInfo]]:
    """Serialize every group through ``put``: returns groups, variables, skipped ones and blobs.

    ``tally`` counts the bytes put. Its total is each group's pickled size once it
    is known, and until then the largest of its variables' ``hints``. ``hashed`` is
    told each buffer's chunk keys.

    The arrays' memory is stored once every group is pickled, chunk by chunk, and
    ``spent`` is told each chunk then: nothing of this checkpoint reads it again.
    Before, a pickler may read memory that no buffer names as its own (a tensor
    made ``from_numpy`` shares an array's). The buffers a pickler made are stored
    with their group, so they are not kept meanwhile.
    """
    tally = tally or Tally(0, untold)
    blobs: dict[str, BlobInfo] = {}
    groups: list[Group] = []
    variables: dict[str, dict[str, Any]] = {}
    refused = {n: why for n, why in capture.refused.items() if n in capture.variables}
    skipped: dict[str, Skipped] = {
        n: {"reason": why, "type": type(capture.variables[n]).__qualname__} for n, why in refused.items()
    }
    kept = {n: v for n, v in capture.variables.items() if n not in refused}
    # Before any pickling: a repr fills caches (a pandas array's ``_cache``, a masked array's fill value, a figure's
    # transforms), which the pickling after it writes. Taken after, in a kernel that writes its checkpoints itself,
    # the first checkpoint left them out and the next listed every such variable as changed.
    looks = {n: serialize.preview(v) for n, v in kept.items()}
    pending = group(kept, namespace=module.__dict__)
    shares: dict[str, list[str]] = {}  # each culprit split from a group: the variables of it it shared objects with
    apart: dict[str, dict[str, Any]] = {}  # each variable of a group written one by one: with which, and why
    waiting: list[_Waiting] = []

    def guess(names: list[str]) -> int:
        return max((hints or {}).get(n, 0) for n in names)

    ahead = sum(map(guess, pending))  # the bytes guessed for the groups not pickled yet
    owed = 0  # the bytes of the arrays waiting
    tally.expect(ahead)
    while pending:
        names = pending.pop()
        ahead -= guess(names)
        objs = {n: capture.variables[n] for n in names}
        try:
            packed = serialize.dumps(objs, module)
        except serialize.NotSerializable as e:
            if len(names) > 1:
                # Find the culprits, each alone; the others are grouped again by what they share without them (a
                # culprit that reached much of the namespace had joined them all), so what they share stays shared
                # (with the culprits it cannot be). Failing only together, they are written one by one.
                culprits = [n for n in names if not _serializable(n, objs[n], module)]
                rest = [n for n in names if n not in culprits]
                regrouped = group({n: objs[n] for n in rest}, namespace=module.__dict__) if culprits and rest else []
                shares.update(_shared_with(culprits, rest, objs, module.__dict__))
                split = [[n] for n in culprits] + regrouped if regrouped else [[n] for n in names]
                if not culprits:  # what they share is written with each: they come back with copies of it
                    apart.update((n, {"from": [m for m in names if m != n], "reason": e.reason}) for n in names)
                pending.extend(split)
                ahead += sum(map(guess, split))
                continue
            value = objs[names[0]]
            skipped[names[0]] = {"reason": e.reason, "type": type(value).__qualname__}
            if shares.get(names[0]):
                skipped[names[0]]["shares"] = shares[names[0]]
            continue
        tally.expect(tally.done + owed + packed.nbytes + ahead)
        key, buffer_keys = _put_group(put, packed, blobs, tally, waiting, hashed)
        owed += sum(b.nbytes for b, mappable in zip(packed.buffers, packed.mappable, strict=True) if mappable)
        stream = blobs[key].size  # its length: a longer blob is refused unread
        groups.append(
            {"key": key, "buffers": buffer_keys, "names": names, "serializer": packed.serializer, "size": stream}
        )
        for n in names:
            variables[n] = {"group": len(groups) - 1, "size": packed.nbytes, **looks[n]}
            if n in apart:
                variables[n]["apart"] = apart[n]
    _put_waiting(put, waiting, blobs, tally, hashed, spent)
    for entry in groups:
        gkey = group_key(entry["key"], entry["buffers"])
        for n in entry["names"]:
            variables[n]["gkey"] = gkey
    return groups, variables, skipped, blobs


def size_hints(capture: Capture, previous: Manifest | None) -> dict[str, int]:
    """A guess of each variable's pickled size: its size in the previous checkpoint, else its buffer's."""
    before = previous["variables"] if previous is not None else {}
    return {n: before[n]["size"] if n in before else serialize.size_hint(v) for n, v in capture.variables.items()}


def _shared_with(
    culprits: list[str], rest: list[str], objs: dict[str, Any], namespace: dict[str, Any]
) -> dict[str, list[str]]:
    """For each of ``culprits``, those of ``rest`` that share objects with it, directly or through each other (the
    parameter list and the optimizer made from a model that cannot be written); nothing where a walk fails."""
    found = sharing({n: objs[n] for n in culprits}, {n: objs[n] for n in rest}, namespace) if rest else None
    shared: dict[str, list[str]] = {}
    for names in found[1] if found is not None else ():
        others = sorted(set(names) & set(rest))
        shared.update((n, others) for n in names if n in culprits and others)
    return shared


def _serializable(name: str, value: Any, module: types.ModuleType) -> bool:
    try:
        serialize.dumps({name: value}, module)
    except serialize.NotSerializable:
        return False
    return True


def prepare(
    blobs: LocalBlobs,
    module: types.ModuleType,
    capture: Capture,
    meta: Meta,
    progress: Progress | None = None,
    previous: Manifest | None = None,
    hashed: Hashed | None = None,
    spent: Spent | None = None,
) -> tuple[Manifest, dict[str, BlobInfo]]:
    """Serialize a checkpoint and make its blobs durable in ``blobs`` (the store's); returns the manifest and
    blobs to commit.

    Nothing is visible until ``Store.commit`` inserts the manifest, after ``link``
    has tied it to its parent: this half can run in a forked child that touches
    no catalog, no stream and no socket, while an earlier child still writes.
    ``progress`` is told the bytes written of those to write, a total first
    guessed from the sizes in the ``previous`` checkpoint and of the values. ``hashed`` is told each
    variable's buffer as it was stored, with its chunk keys, and ``spent`` the memory nothing reads again (``pack``).
    """

    tally = Tally(0, progress or untold)
    hints = size_hints(capture, previous) if progress is not None else None
    with blobs.batch() as batch:
        groups, variables, skipped, written = pack(module, capture, batch.put, tally, hints, hashed, spent)
        # Reads only what the kernel copied out of its random streams and settings, nothing ``spent`` was told.
        packed_random = serialize.dumps(capture.random, module)
        tally.expect(tally.done + packed_random.nbytes)
        waiting: list[_Waiting] = []
        random_key, random_buffers = _put_group(batch.put, packed_random, written, tally, waiting)
        _put_waiting(batch.put, waiting, written, tally)
    tally.finish()
    # What the readers below look for is never a weak proxy, whose ``isinstance`` asks its object (ReferenceError
    # once that is gone, which failed every checkpoint).
    readable = {n: v for n, v in capture.variables.items() if type(v) not in serialize.WEAK_PROXIES}
    manifest: Manifest = {
        "format": FORMAT_VERSION,
        "uid": new_uid(),  # the checkpoint's, from its capture on: its writer's result is committed once
        "session": meta.session,
        "time": meta.at,
        "cell": meta.cell,
        "last_cell": meta.last_cell,
        "trigger": meta.trigger,
        "status": meta.status,
        "message": meta.message,
        "tag": meta.tag,
        "groups": groups,
        "variables": variables,
        "modules": capture.modules,
        "skipped": skipped,
        "random": {"key": random_key, "buffers": random_buffers, "size": written[random_key].size},
        "streams": streams_digest(capture.random),
        "settings": settings.fingerprints(capture.random.get("settings", {})),
        "registrations": registrations.read(readable, module.__name__),
        "paths": capture.paths,
        "environment": capture.environment,
        "configuration": capture.configuration,
        "attributes": capture.attributes,
        "aliases": attributes.aliases(readable),
        "warnings": capture.warnings,
        "logging": loggers.read(capture.starts.loggers, readable) if capture.starts is not None else {},
        "versions": versions(),
    }
    return manifest, written


def link(manifest: Manifest, parent: int | None, parent_manifest: Manifest | None) -> Manifest:
    """The manifest with its place on the timeline: its parent, and what changed since it."""
    parent_manifest = parent_manifest or {}
    before, previous_modules = parent_manifest.get("variables", {}), parent_manifest.get("modules", {})
    variables, modules = manifest["variables"], manifest["modules"]
    changed = sorted(n for n, v in variables.items() if before.get(n, {}).get("gkey") != v["gkey"])
    changed += sorted(n for n, m in modules.items() if previous_modules.get(n) != m)
    # A variable left out now that was written before, or bound anew, changed too: an undo must not step over it.
    then_skipped = parent_manifest.get("skipped", {})
    changed += sorted(n for n in manifest["skipped"] if n in before or n not in then_skipped)
    # A cell that only changed a setting (plt.style.use) changed the state: an undo must not step over it.
    now, then = manifest.get("settings", {}), parent_manifest.get("settings", {})
    changed += sorted(n for n in set(now) | set(then) if now.get(n) != then.get(n))
    # So did one that only drew from a global random stream (``random.random()``, ``np.random.rand()``): an undo
    # goes back to the stream before it.
    streams, before_streams = manifest.get("streams"), parent_manifest.get("streams")
    if streams is not None and before_streams is not None and streams != before_streams:
        changed.append(RANDOM)
    # So did one that only registered a class with a library (``Sequence.register(Rows)``), or moved.
    made = {registrations.label(r) for r in manifest.get("registrations", [])}
    changed += sorted(made ^ {registrations.label(r) for r in parent_manifest.get("registrations", [])})
    changed += paths.changes(manifest.get("paths", {}), parent_manifest.get("paths", {}))
    changed += shellconfig.changes(manifest.get("configuration", []), parent_manifest.get("configuration", []))
    # Libraries set filters, loggers and environment variables up as they are imported (numpy four filters, torch
    # 43 loggers, scikit-learn KMP_DUPLICATE_LIB_OK): a cell that imported a module shows the module, not what its
    # import set up (an undo stops at it all the same).
    if not any(previous_modules.get(n) != m for n, m in modules.items()):
        for key, label in (
            ("warnings", warnfilters.WARNING_FILTERS),
            ("logging", loggers.LOGGING),
            ("environment", environment.ENVIRONMENT),
        ):
            changed += [label] if manifest.get(key, {}) != parent_manifest.get(key, {}) else []
    gone = (set(before) | set(previous_modules)) - set(variables) - set(modules) - set(manifest["skipped"])
    return {**manifest, "parent": parent, "changed": changed, "removed": sorted(gone)}

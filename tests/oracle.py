"""The oracle: one digest of a whole namespace, values and identity, computed inside a kernel.

Two namespaces have equal digests when every user variable holds an equal value
(array bytes, frame contents, containers element by element, functions by their
code and captured values, instances by their attributes), the same objects are
shared between them the same way (``a is b``, a list inside two dicts, a view
and the array it looks into, at the same offset), and the global random streams
are at the same point. A restore that mixes two cells, loses a change or breaks
an alias gives another digest.

Kernels import it from the tests folder (``PYTHONPATH``) and call it without
binding a name: ``__import__("oracle").digest(globals())``.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sys
import types
from pathlib import Path
from typing import Any

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_ATOMS = (int, float, complex, str, bytes, bool, type(None), range)


def _user_names(namespace: dict[str, Any], skip: set[str]) -> list[str]:
    from jupyter_ckpt.capture import is_user_variable

    hidden: set[str] = set()
    shell = namespace.get("get_ipython")
    if callable(shell):
        hidden = set(shell().user_ns_hidden)
    return sorted(n for n in namespace if n not in skip and is_user_variable(n, namespace[n], hidden))


class _Walker:
    def __init__(self) -> None:
        self.memo: dict[int, int] = {}
        self.keep: list[Any] = []  # objects made during the walk stay alive, so their ids stay unique
        self.out = hashlib.sha256()

    def emit(self, *parts: Any) -> None:
        self.out.update(repr(parts).encode())
        self.out.update(b"\x00")

    def walk(self, o: Any) -> None:
        t = type(o)
        if t in _ATOMS:
            self.emit(t.__name__, o)
            return
        if id(o) in self.memo:
            self.emit("@", self.memo[id(o)])
            return
        self.memo[id(o)] = len(self.memo)
        self.keep.append(o)
        numpy = sys.modules.get("numpy")
        pandas = sys.modules.get("pandas")
        if numpy is not None and isinstance(o, numpy.ndarray):
            self._array(o, numpy)
        elif pandas is not None and isinstance(o, (pandas.DataFrame, pandas.Series, pandas.Index)):
            self._pandas(o, pandas)
        elif t in (dict,) or isinstance(o, dict):
            self.emit(t.__qualname__, len(o))
            for k, v in o.items():
                self.walk(k)
                self.walk(v)
        elif isinstance(o, (list, tuple)):
            self.emit(t.__qualname__, len(o))
            for v in o:
                self.walk(v)
        elif isinstance(o, (set, frozenset)):
            self.emit(t.__qualname__, sorted(_ADDRESS.sub("?", repr(v)) for v in o))
        elif isinstance(o, types.FunctionType):
            self.emit("function", o.__qualname__, o.__code__.co_code, o.__code__.co_consts.__repr__())
            self.walk(o.__defaults__)
            for cell in o.__closure__ or ():
                self.walk(cell.cell_contents)
        elif isinstance(o, type):
            # ``__slotnames__`` is copyreg's cache, which pickling an instance (a checkpoint) adds
            self.emit("class", o.__module__, o.__qualname__, sorted(set(vars(o)) - {"__slotnames__"}))
        elif isinstance(o, types.ModuleType):
            self.emit("module", o.__name__)
        elif isinstance(getattr(o, "__dict__", None), dict):
            self.emit("instance", t.__module__, t.__qualname__)
            self.walk(vars(o))
        else:
            self.emit("other", t.__module__, t.__qualname__, _ADDRESS.sub("?", repr(o)))

    def _array(self, a: Any, numpy: Any) -> None:
        root = a
        while isinstance(root.base, numpy.ndarray):
            root = root.base
        if root is not a:  # a view: which array it looks into, and where
            offset = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
            self.emit("view", a.dtype.str, a.shape, a.strides, offset)
            self.walk(root)
        elif a.dtype.hasobject:
            self.emit("objects", a.shape)
            for v in a.ravel().tolist():
                self.walk(v)
        else:
            self.emit("array", a.dtype.str, a.shape, hashlib.sha256(numpy.ascontiguousarray(a).tobytes()).hexdigest())

    def _pandas(self, o: Any, pandas: Any) -> None:
        try:
            values = pandas.util.hash_pandas_object(o, index=not isinstance(o, pandas.Index)).to_numpy().tobytes()
        except TypeError:  # unhashable cells (lists in a column)
            values = _ADDRESS.sub("?", o.to_string()).encode()
        columns = list(map(str, getattr(o, "columns", [])))
        dtypes = [str(d) for d in (o.dtypes if hasattr(o, "columns") else [o.dtype])]
        self.emit(type(o).__qualname__, o.shape, columns, dtypes, hashlib.sha256(values).hexdigest())


def digest(namespace: dict[str, Any], skip: tuple[str, ...] = ()) -> str:
    """The digest of every user variable of ``namespace`` (less ``skip``) and of the global random states."""
    walker = _Walker()
    for name in _user_names(namespace, set(skip)):
        walker.emit("name", name)
        walker.walk(namespace[name])
    walker.emit("random", random.getstate())
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        kind, keys, pos, has_gauss, gauss = numpy.random.get_state()
        walker.emit("numpy.random", kind, hashlib.sha256(keys.tobytes()).hexdigest(), pos, has_gauss, gauss)
    return walker.out.hexdigest()


def record(path: str, namespace: dict[str, Any]) -> None:
    """Append this cell's ``gen`` (the notebook's own cell counter) and digest to ``path``, outside the namespace."""
    with Path(path).open("a") as f:
        f.write(json.dumps({"gen": namespace["gen"], "digest": digest(namespace)}) + "\n")

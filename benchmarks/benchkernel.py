"""The harness's instruments inside a benchmark kernel (imported there through PYTHONPATH).

Nothing here lands in the user namespace: the harness calls these functions from
silent executions and user expressions, which fire no ``pre_run_cell`` /
``post_run_cell`` event, so no tool checkpoints them.

Cell hooks record ``time.monotonic()`` (CLOCK_MONOTONIC, the same clock in every
process of the machine) at the edges of the user's code: ``pre_run_cell`` last of
all hooks and ``post_run_cell`` first of all hooks, so a tool's hooks fall outside.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import resource
import sys
import time
import types
from typing import Any

import xxhash

# The marks of each cell, oldest first (the last is the current cell's): what ``history`` hands the harness.
_cells: list[dict[str, float]] = [{}]
# IPython's own names (Kishu's namespace swap drops them from user_ns_hidden) and a tool's import.
_NOT_USER = {"In", "Out", "exit", "quit", "get_ipython", "open", "init_kishu"}
_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), tuple, frozenset)


def _mark(name: str, usage: bool = False) -> Any:
    """A hook that records the time, and with ``usage`` the kernel's CPU seconds (user, system) and minor faults
    (the copies on write a writer's pages cost are system time and faults)."""

    def hook(*args: Any) -> None:
        if name == "pre_first":
            _cells.append({})
        _cells[-1][name] = time.monotonic()
        if usage:
            ru = resource.getrusage(resource.RUSAGE_SELF)
            _cells[-1][f"{name}_usage"] = [ru.ru_utime, ru.ru_stime, ru.ru_minflt]

    hook.__name__ = f"bench_{name}"
    return hook


_pre_first, _pre_last = _mark("pre_first"), _mark("pre_last", usage=True)
_post_first, _post_last = _mark("post_first", usage=True), _mark("post_last")


def _timed(fork: Any) -> Any:
    """``os.fork`` that adds the parent's time in it to the cell's ``fork_s`` mark (what a forking tool pays)."""

    def timed_fork() -> int:
        start = time.monotonic()
        pid: int = fork()
        if pid:
            _cells[-1]["fork_s"] = _cells[-1].get("fork_s", 0.0) + time.monotonic() - start
        return pid

    return timed_fork


def install(ip: Any) -> None:
    """Before any tool loads: the first pre/post hooks, and a clock on ``os.fork``."""
    ip.events.register("pre_run_cell", _pre_first)
    ip.events.register("pre_run_cell", _pre_last)
    ip.events.register("post_run_cell", _post_first)
    os.fork = _timed(os.fork)


def reorder(ip: Any) -> None:
    """After a tool loaded: move the user-code start mark behind the tool's pre_run_cell hooks, and mark
    the end of its post_run_cell hooks."""
    ip.events.unregister("pre_run_cell", _pre_last)
    ip.events.register("pre_run_cell", _pre_last)
    ip.events.register("post_run_cell", _post_last)


def history() -> str:
    """Every cell's marks so far, oldest first: JSON ``[{pre_first, pre_last, post_first, post_last, fork_s,
    pre_last_usage, post_first_usage}]``."""
    return json.dumps([{"fork_s": 0.0, **marks} for marks in _cells[1:]])


def dump_every_cell(ip: Any, directory: str) -> None:
    """The dill peer: ``dill.dump_module`` to a new file after every cell."""
    import dill

    def dump_module(result: Any) -> None:
        dill.dump_module(f"{directory}/{result.execution_count:04d}.pkl", refimported=True)

    ip.events.register("post_run_cell", dump_module)


def fork_every_cell(ip: Any) -> None:
    """The floor of any fork-per-cell tool: after every cell, fork a child that exits at once.

    The parent reaps the previous child without waiting, as a writer would.
    """
    children: list[int] = []

    def fork_only(result: Any) -> None:
        children[:] = [pid for pid in children if os.waitpid(pid, os.WNOHANG)[0] == 0]
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        children.append(pid)

    ip.events.register("post_run_cell", fork_only)


class _Canonical(pickle.Pickler):
    """Pickle bytes as a digest, with the parts whose bytes are not stable across a round trip made canonical.

    Numpy objects and pandas objects become their content hashes (an unpickled dtype, for one, is not the
    object the original arrays shared, which changes the memo and so the bytes); functions and classes
    defined in the notebook become their code and attributes instead of a bare reference. No memo ("fast"
    mode): which equal strings are one object is not stable across a round trip either.
    """

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=5)
        self.fast = True

    def reducer_override(self, obj: Any) -> Any:
        np = sys.modules.get("numpy")
        pd = sys.modules.get("pandas")
        if np is not None and isinstance(obj, np.ndarray) and obj.dtype != object:
            data = xxhash.xxh3_128_hexdigest(np.ascontiguousarray(obj).data.cast("B"))
            return str, (f"ndarray {obj.dtype} {obj.shape} {data}",)
        if np is not None and isinstance(obj, (np.generic, np.dtype)):
            return str, (f"numpy {obj!r}",)
        if pd is not None and isinstance(obj, (pd.DataFrame, pd.Series, pd.Index)):
            return str, (_pandas(pd, obj),)
        if isinstance(obj, (types.FunctionType, type)) and obj.__module__ == "__main__":
            return str, (f"{obj.__qualname__} {_definition(obj)!r}",)
        return NotImplemented


def _pandas(pd: Any, obj: Any) -> str:
    kind = (obj.dtypes, obj.columns) if isinstance(obj, pd.DataFrame) else obj.dtype
    try:
        rows = xxhash.xxh3_128_hexdigest(pd.util.hash_pandas_object(obj, index=True).to_numpy().data)
    except TypeError:  # unhashable cells (lists, dicts)
        rows = xxhash.xxh3_128_hexdigest(pickle.dumps(obj.to_dict(), protocol=5))
    return f"{type(obj).__name__} {kind!r} {rows}"


def _definition(value: Any) -> str:
    if isinstance(value, type):
        return repr(sorted(vars(value)))
    code = value.__code__
    consts = [c for c in code.co_consts if not isinstance(c, types.CodeType)]  # nested code reprs hold addresses
    return repr((code.co_code, code.co_names, consts))


def _hash_value(value: Any) -> str:
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__}"
    if isinstance(value, (set, frozenset)):  # iteration order is not part of the value
        value = sorted(map(repr, value))
    buffer = io.BytesIO()
    try:
        _Canonical(buffer).dump(value)
    except Exception as e:
        return f"unpicklable {type(value).__qualname__}: {type(e).__name__}"
    return xxhash.xxh3_128_hexdigest(buffer.getbuffer())


def digest(ip: Any) -> str:
    """JSON ``{name: hex}`` over every user variable; names bound to one object say so (identity)."""
    hidden = set(ip.user_ns_hidden)
    first_name: dict[int, str] = {}
    out = {}
    for name in sorted(ip.user_ns):
        if name.startswith("_") or name in hidden or name in _NOT_USER:
            continue
        value = ip.user_ns[name]
        alias = name if isinstance(value, _IMMUTABLE) else first_name.setdefault(id(value), name)
        out[name] = _hash_value(value) + ("" if alias == name else f" is {alias}")
    return json.dumps(out)

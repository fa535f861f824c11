"""Restoring a checkpoint into a live namespace, and comparing two states.

Everything is read, verified and unpickled before the namespace is touched, so
a tampered or missing blob leaves the user's variables exactly as they were.
The one exception is opt-out: the raw chunks of a large array may be mapped
instead of read (``lazy``), which makes the array usable at once; those chunks
hold plain numbers, never pickles, and are verified afterwards in the background.
Groups whose variables still hold the very objects that were written with the
same content are not read again: undoing a cell reads only what it changed.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import random
import sys
import textwrap
import types
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from . import attributes, capture, mapping, memory, registrations, serialize, settings
from .blobs import LocalBlobs, content_key
from .capture import CHUNK, is_user_variable
from .errors import BadArgument
from .manifest import Buffer, Group, Manifest, RandomState
from .progress import Progress, Tally, untold
from .recipes import rebuilt_by
from .units import human_bytes

Patch = tuple[memoryview, int, memoryview]

# A lazy restore maps, rather than reads, out-of-band buffers at least this large whose chunks are raw.
LAZY_MIN = 64 << 20


def _cells(counts: Iterable[int | None]) -> str:
    return ", ".join(f"[{count}]" for count in counts)


@dataclass
class RestoreReport:
    checkpoint: int
    # Its number in the session (``#N``), when the restore knows it.
    number: int | None = None
    loaded: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    patched: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    not_restored: dict[str, str] = field(default_factory=dict)
    # Variables that shared objects the checkpoint could not write together: each came back with its own copy.
    apart: dict[str, str] = field(default_factory=dict)
    # Chunks mapped by a lazy restore and not yet verified, each with the variables built on it.
    unverified: dict[str, list[str]] = field(default_factory=dict)
    # What replay did or could not do for each variable the checkpoint could not hold.
    replay: dict[str, str] = field(default_factory=dict)
    # The variables ``%checkpoint replay`` would rebuild and the cells it would run, if asked; and those
    # cells' code (count and source, verified), shown before anything runs.
    replayable: str = ""
    replay_cells: list[dict[str, Any]] = field(default_factory=list)
    # An undo that went back past the cell before the last: the cells it undid as well (their counts), and
    # why: of the cells it undid, those whose checkpoint changed nothing (an undo steps over them), and those
    # whose state was not checkpointed.
    also_undone: list[int | None] = field(default_factory=list)
    unchanged: list[int | None] = field(default_factory=list)
    not_checkpointed: list[int | None] = field(default_factory=list)

    def lazy_names(self, keys: Iterable[str] | None = None) -> list[str]:
        """The variables built on the given unverified chunks (all of them by default)."""
        chosen = self.unverified if keys is None else keys
        return sorted({n for key in chosen for n in self.unverified[key]})

    def __str__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """How IPython shows ``jupyter_ckpt.undo()`` at the end of a cell: its summary."""
        printer.text(self.summary())

    def summary(self) -> str:
        """What the restore did, as ``%checkpoint restore`` prints it (and ``print(jupyter_ckpt.undo())``)."""
        name = f"#{self.number} (id {self.checkpoint})" if self.number is not None else f"(id {self.checkpoint})"
        parts = [f"restored kernel checkpoint {name}: {len(self.loaded)} variable(s) read"]
        if self.patched:
            parts.append(f"{len(self.patched)} changed in place")
        if self.kept:
            parts.append(f"{len(self.kept)} unchanged")
        if self.unverified:
            parts.append(f"{', '.join(self.lazy_names())} mapped (read as used, verified in the background)")
        if self.removed:
            parts.append("removed " + ", ".join(self.removed))
        line = "; ".join(parts)
        if self.also_undone:
            reasons = [f"{_cells(self.unchanged)} changed nothing"] if self.unchanged else []
            if skipped := self.not_checkpointed:
                states = "the state after {} was" if len(skipped) == 1 else "the states after {} were"
                reasons.append(states.format(_cells(skipped)) + " not checkpointed")
            line += f"\n  this is the state before {_cells(self.also_undone)} too: {'; '.join(reasons)}"
        for name, why in sorted(self.not_restored.items()):
            replayed = self.replay.get(name, "")
            if rebuilt_by(replayed):
                note = replayed.removeprefix("replayed").removeprefix("; ")
                line += f"\n  rebuilt by running its cells again: {name}" + (f" ({note})" if note else "")
            else:
                extra = f"; {self.replay[name]}" if name in self.replay else ""
                line += f"\n  not restored: {name} ({why}{extra})"
        for name, why in sorted(self.apart.items()):
            line += f"\n  restored apart: {name} ({why})"
        for name, why in sorted(self.replay.items()):
            if name not in self.not_restored:  # restored, and made again with a variable replay rebuilt
                line += f"\n  {name}: {why}"
        if self.replayable:
            line += f"\n  %checkpoint replay would rebuild {self.replayable} by running this code again:"
            for cell in self.replay_cells:
                label = f"    [{cell['count']}] "
                line += "\n" + label + textwrap.indent(cell["source"].rstrip(), " " * len(label))[len(label) :]
        return line


def _read_buffer(blobs: LocalBlobs, buffer: Buffer, tally: Tally) -> memoryview:
    """One out-of-band buffer, its chunks read straight into place and verified, on every core."""
    size = buffer["size"]
    # Anonymous memory: the kernel hands out zero pages as they are written, with no upfront memset.
    out = mapping.array_memory(size) if size else memoryview(bytearray())

    def fill(index: int, key: str) -> int:
        piece = out[index * CHUNK : min(size, (index + 1) * CHUNK)]
        blobs.read(key, into=piece)
        return piece.nbytes

    # hashlib and file reads release the GIL, so verification (HMAC-SHA256, ~1 GB/s a core) runs in parallel.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for n in pool.map(fill, range(len(buffer["chunks"])), buffer["chunks"]):
            tally.add(n)
    return out


def _map_buffer(blobs: LocalBlobs, buffer: Buffer) -> memoryview | None:
    """A large array's memory whose chunks are all raw, mapped from their files unverified; else None.

    Only an array's memory: numbers (or text) that nothing unpickles. A pickle stream is read, and
    verified, before a byte of it is unpickled, however large it is.
    """
    if not buffer.get("mappable") or buffer["size"] < LAZY_MIN or not mapping.supported():
        return None
    pieces: list[mapping.Piece] = []
    for index, key in enumerate(buffer["chunks"]):
        extent = blobs.raw_extent(key)
        if extent is None:
            return None
        pieces.append((index * CHUNK, *extent))
    try:
        return mapping.map_pieces(buffer["size"], pieces)
    except OSError:
        return None  # read it instead


def _listed(names: list[str]) -> str:
    return ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")


def read_group(
    blobs: LocalBlobs,
    entry: Group | RandomState,
    unverified: dict[str, list[str]] | None = None,
    tally: Tally | None = None,
    size: int = 0,
) -> serialize.Packed:
    """The verified bytes of one group (or of the random states).

    With ``unverified``, large raw buffers are mapped instead of read, and their
    chunks are added to it, for the caller to verify. ``tally`` counts the
    bytes as they are read (a mapped buffer's at once). ``size``: the bytes its
    variables take in memory, if known. Unless the headroom holds what of them is
    not mapped, OutOfMemory refuses the group before a byte of it is read.
    """
    tally = tally or Tally(0, untold)
    mapped = [None if unverified is None else _map_buffer(blobs, buffer) for buffer in entry["buffers"]]
    read = sum(b["size"] for b, view in zip(entry["buffers"], mapped, strict=True) if view is None)
    names = entry.get("names", [])
    if max(size, read) >= LAZY_MIN:  # the smaller ones were asked for together (``restore_namespace``)
        need = max(size - sum(v.nbytes for v in mapped if v is not None), read)
        memory.ensure_room(need, f"reading {_listed(names)}")
    buffers = []
    for buffer, view in zip(entry["buffers"], mapped, strict=True):
        if view is not None and unverified is not None:
            buffers.append(view)
            for key in buffer["chunks"]:
                unverified.setdefault(key, []).extend(names)
            tally.add(buffer["size"])
        else:
            buffers.append(_read_buffer(blobs, buffer, tally))
    payload = bytes(blobs.read(entry["key"], size=entry.get("size")))
    tally.add(len(payload))
    return serialize.Packed(entry.get("serializer", "pickle"), payload, buffers)


# Per chunk of a live buffer, its content key if known without hashing it, else None (``WriteWatch.keys``).
KnownKeys = Callable[[memoryview], list[str | None]]


def _chunk_keys(flat: memoryview, known: KnownKeys | None = None) -> list[str]:
    """The content key of every chunk of a live buffer: those ``known`` gives, and the others hashed on every
    core (xxhash releases the GIL)."""
    keys: list[str | None] = known(flat) if known is not None else [None] * -(-flat.nbytes // CHUNK)
    unknown = [i for i, key in enumerate(keys) if key is None]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        found = pool.map(lambda i: content_key(flat[i * CHUNK : (i + 1) * CHUNK]), unknown)
        hashed = dict(zip(unknown, found, strict=True))
    return [hashed[i] if key is None else key for i, key in enumerate(keys)]


def _patches(
    blobs: LocalBlobs,
    module: types.ModuleType,
    target: Group,
    namespace: dict[str, Any],
    known: KnownKeys | None = None,
) -> list[Patch] | None:
    """The chunks to copy into the live objects of a group to give them the target's content, or None.

    The live objects are pickled again with the target's pickler: their stream
    must be the target's, byte for byte, and their buffers the same sizes. Every
    chunk of those buffers is then hashed (or its key ``known``), and the chunks
    that differ from the target's are read (verified) to be copied in. An empty
    list means the live objects hold the target's content already. None means the
    group must be read.
    """
    # Interned, as the namespace's own keys are: pickle memoizes strings by identity, so a function whose
    # name is the variable's name pickles to other bytes under an equal string that is another object.
    names = [sys.intern(n) for n in target["names"]]
    try:
        packed = serialize.dump_with(target["serializer"], {n: namespace[n] for n in names}, module)
    except Exception:  # whatever a live object's __reduce__ raises: read the group instead
        return None
    if content_key(packed.payload) != target["key"] or len(packed.buffers) != len(target["buffers"]):
        return None
    plan: list[Patch] = []
    for view, then in zip(packed.buffers, target["buffers"], strict=True):
        flat = view.cast("B") if view.format != "B" or view.ndim != 1 else view
        if flat.nbytes != then["size"]:
            return None
        live = _chunk_keys(flat, known)
        changed = [(i, t) for i, (n, t) in enumerate(zip(live, then["chunks"], strict=True)) if n != t]
        if changed and flat.readonly:
            return None  # a text column's buffer, or a read-only array: rebuild the group
        memory.ensure_room(len(changed) * CHUNK, f"reading the parts of {_listed(names)} that changed")
        plan += [(flat, i * CHUNK, blobs.read(t, size=min(CHUNK, flat.nbytes - i * CHUNK))) for i, t in changed]
    return plan


def _shared_across(groups: dict[int, list[str]], namespace: dict[str, Any]) -> set[int]:
    """The groups (by index) whose live variables share an object with another of them."""
    of = {n: index for index, names in groups.items() for n in names}
    shared: set[int] = set()
    for names in capture.group({n: namespace[n] for n in of}):
        indices = {of[n] for n in names}
        if len(indices) > 1:
            shared |= indices
    return shared


# A group to load: its names (those wanted), its bytes, and why it failed the last time it was tried.
Loading = tuple[list[str], serialize.Packed, str]


def _load(
    module: types.ModuleType, groups: list[Loading], incoming: dict[str, Any], loaded: list[str]
) -> list[Loading]:
    """Unpickle each group into ``incoming`` and ``loaded``, and the namespace (where the code of the groups read
    after it finds it); returns those that failed, with why."""
    failed = []
    for names, packed, _ in groups:
        try:
            objs = serialize.loads(packed, module)
        except Exception as e:
            failed.append((names, packed, f"{type(e).__name__}: {e}"))
            continue
        module.__dict__.update(objs)
        incoming.update({n: objs[n] for n in names})
        loaded.extend(names)
    return failed


def _import_modules(modules: dict[str, str]) -> tuple[dict[str, types.ModuleType], dict[str, str]]:
    """The checkpoint's modules by alias, imported, and why the others failed to import."""
    imported, failed = {}, {}
    for alias, name in modules.items():
        try:
            imported[alias] = importlib.import_module(name)
        except Exception as e:  # an import may fail any way at all
            failed[alias] = f"import {name} failed: {type(e).__name__}: {e}"
    return imported, failed


@contextlib.contextmanager
def _as_read(namespace: dict[str, Any], modules: dict[str, types.ModuleType], reading: Iterable[str]) -> Iterator[None]:
    """The namespace with the checkpoint's ``modules`` bound and the variables ``reading`` unbound for as long as
    it is read, and exactly as it was after (whatever reading it bound meanwhile): nothing changes until the
    restore applies it. Code that runs while a group loads finds each variable read so far, and never the live
    value of one read after it (a NameError, and that group is tried again once the others are in)."""
    before = dict(namespace)
    for name in reading:
        namespace.pop(name, None)
    namespace.update(modules)
    try:
        yield
    finally:
        for name in [n for n in namespace if n not in before]:
            del namespace[name]
        namespace.update(before)  # with no moment where the kernel's other threads would find it empty


def _forget_equal_objects() -> None:
    """Empty sympy's cache, which hands out the expression it made before for any equal one: in the kernel that
    made them, the expressions read back (and ``f(x)`` after) were the cached ones of the ``Function('f')`` the
    restore replaced, so ``f(x).func is f`` was False. It fills again as expressions are made."""
    cache = sys.modules.get("sympy.core.cache")
    if cache is not None:
        cache.clear_cache()


def _set_torch_stream(state: bytes) -> None:
    torch = importlib.import_module("torch")
    torch.set_rng_state(torch.frombuffer(bytearray(state), dtype=torch.uint8))


# How each global random stream a checkpoint keeps (``capture.process_states``) is set again.
_RANDOM_STREAMS: dict[str, Callable[[Any], None]] = {
    "random": random.setstate,
    "numpy": lambda state: importlib.import_module("numpy").random.set_state(state),
    "torch": _set_torch_stream,
}


def set_process_states(states: dict[str, Any], module: types.ModuleType) -> dict[str, str]:
    """Set the global random streams and the libraries' settings of ``states`` (``capture.process_states``);
    returns those not set again, with why. A checkpoint older than settings keeps none: the live ones stay."""
    failed = {}
    for stream, set_state in _RANDOM_STREAMS.items():
        if stream in states:
            try:
                set_state(states[stream])
            except Exception as e:  # numpy or torch missing here: the other streams and the variables stand
                failed[f"{stream} random stream"] = f"not set again: {type(e).__name__}: {e}"
    if "settings" in states:
        failed.update(settings.apply(states["settings"], module))
    return failed


def restore_namespace(
    blobs: LocalBlobs,
    module: types.ModuleType,
    checkpoint: int,
    manifest: Manifest,
    *,
    held: dict[str, int] | None = None,
    known: KnownKeys | None = None,
    only: Iterable[str] | None = None,
    hidden: Iterable[str] = (),
    exclude: Iterable[str] = (),
    lazy: bool = False,
    progress: Progress | None = None,
    applying: Callable[[], object] | None = None,
) -> RestoreReport:
    """Make ``module``'s namespace hold the checkpoint's state, read from ``blobs`` (the store's); returns what
    was done. ``applying`` is called once everything is read and verified, before the namespace is touched: a
    restore refused (a bad name, a tampered blob, too little memory) calls nothing.

    ``held`` maps names to the ids of the objects they were bound to at the
    last checkpoint or restore: only groups whose variables are still bound to
    those objects are compared with the target (a hint that saves pickling
    what was rebound; the comparison reads the bytes, or takes the keys of the
    chunks ``known`` unchanged since they were hashed). With ``lazy``, large raw
    arrays are mapped and listed in ``unverified``. ``progress`` is told how many
    bytes of the variables are read of those to read.
    """
    namespace = module.__dict__
    variables: dict[str, dict[str, Any]] = manifest["variables"]
    wanted = set(only) if only is not None else None
    if wanted is not None:
        unknown = wanted - set(variables) - set(manifest["modules"]) - set(manifest["skipped"])
        if unknown:
            raise BadArgument(f"checkpoint {checkpoint} has no variable {', '.join(sorted(unknown))}")
    report = RestoreReport(checkpoint)

    # 1. Read, verify and unpickle everything needed, touching nothing yet.
    plans: dict[int, list[Patch]] = {}
    for index, entry in enumerate(manifest["groups"]):
        names = entry["names"]
        if held is None or any(wanted is not None and n not in wanted for n in names):
            continue
        if all(n in namespace and id(namespace[n]) == held.get(n) for n in names):
            plan = _patches(blobs, module, entry, namespace, known)
            if plan is not None:
                plans[index] = plan
    for index in _shared_across({i: manifest["groups"][i]["names"] for i in plans}, namespace):
        del plans[index]
    incoming: dict[str, Any] = {}
    failed: dict[str, str] = {}
    patches: list[Patch] = []
    # A group's variables each have its size: pickle and arrays.
    sizes = [
        variables[entry["names"][0]]["size"]
        for index, entry in enumerate(manifest["groups"])
        if index not in plans and any(wanted is None or n in wanted for n in entry["names"])
    ]
    # Asked of the headroom (0.13 ms a reading) once for the groups too small to be mapped, and for each larger one
    # as it is read (``read_group``), once it is known what of it is mapped.
    memory.ensure_room(sum(n for n in sizes if n < LAZY_MIN), "reading the variables")
    tally = Tally(sum(sizes), progress or untold)
    tally.progress(0, tally.total)
    imported, import_failed = _import_modules(manifest["modules"])
    # Code runs while a group is unpickled (a __setstate__, a notebook function a __reduce__ names) and reads the
    # namespace: it sees the checkpoint's modules, the variables kept and those read so far, never the live value
    # of one still to read; then the namespace is put back.
    reading = [
        n
        for index, entry in enumerate(manifest["groups"])
        if index not in plans
        for n in entry["names"]
        if wanted is None or n in wanted
    ]
    _forget_equal_objects()
    with _as_read(namespace, imported, reading):
        waiting: list[Loading] = []  # groups that failed to load, with why
        for index, entry in enumerate(manifest["groups"]):
            names = [n for n in entry["names"] if wanted is None or n in wanted]
            if not names:
                continue
            if index in plans:
                patches += plans[index]
                (report.patched if plans[index] else report.kept).extend(names)
                continue
            size = variables[entry["names"][0]]["size"] or 0
            packed = read_group(blobs, entry, report.unverified if lazy else None, tally, size)  # a refusal refuses all
            waiting += _load(module, [(names, packed, "")], incoming, report.loaded)
        # A group whose code needed a variable read after it goes again, as long as that brings more back.
        while waiting and len(retried := _load(module, waiting, incoming, report.loaded)) < len(waiting):
            waiting = retried
        for names, _, why in waiting:  # a module gone, a class changed: these stay out, the others come back
            failed.update(dict.fromkeys(names, why))
        states: dict[str, Any] = {}
        if wanted is None:
            packed = read_group(blobs, manifest["random"])
            try:
                states = serialize.loads(packed, module)
            except Exception as e:
                report.not_restored["random states"] = f"{type(e).__name__}: {e}"

    # 2. Apply.
    if applying is not None:
        applying()
    if wanted is None:
        keep = set(variables) | set(manifest["modules"]) | set(manifest["skipped"])
        hidden = set(hidden) | set(exclude)
        for name in list(namespace):
            if name not in keep and is_user_variable(name, namespace[name], hidden):
                del namespace[name]
                report.removed.append(name)
    changed = manifest.get("attributes", {})
    assigned = {n: incoming.pop(n) for n in changed if n in incoming}
    namespace.update(incoming)
    for view, start, chunk in patches:
        view[start : start + chunk.nbytes] = chunk
    for alias in manifest["modules"]:
        if wanted is not None and alias not in wanted:
            continue
        if alias in imported:
            namespace[alias] = imported[alias]
            report.modules.append(alias)
        else:
            report.not_restored[alias] = import_failed[alias]
    report.not_restored.update(attributes.apply(namespace, assigned, changed))  # on the modules and classes now bound
    report.not_restored.update(attributes.rebind(namespace, manifest.get("aliases", {}), incoming))
    report.not_restored.update(set_process_states(states, module))  # after the modules are imported
    # Of the classes now in the namespace (the checkpoint's, or the ones a partial restore kept).
    made = [r for r in manifest.get("registrations", []) if r[3] not in failed and (wanted is None or r[3] in wanted)]
    report.not_restored.update(registrations.apply(made, namespace))

    # What a variable not restored is left as; an attribute not set again has the value its module has.
    current = set(namespace) | set(changed)
    state = {True: "kept its current value", False: "absent"}
    for name, why in failed.items():
        report.not_restored[name] = f"could not be loaded ({why}); {state[name in current]}"
    for name, info in manifest["skipped"].items():
        if wanted is not None and name not in wanted:
            continue
        why = f"{info['type']} could not be serialized: {info['reason']}"
        report.not_restored[name] = f"{why}; {state[name in current]}"
    for name in report.loaded:
        if (apart := variables[name].get("apart")) is not None:
            others = ", ".join(apart["from"][:5]) + (
                f" and {len(apart['from']) - 5} more" if len(apart["from"]) > 5 else ""
            )
            report.apart[name] = (
                f"it shared objects with {others}, which could not be written together ({apart['reason']}):"
                " each has its own copy of them now"
            )
    report.removed.sort()
    return report


@dataclass
class Diff:
    added: dict[str, dict[str, Any]]
    removed: dict[str, dict[str, Any]]
    changed: dict[str, tuple[dict[str, Any], dict[str, Any]]]

    def as_dict(self) -> dict[str, Any]:
        return {
            "added": self.added,
            "removed": self.removed,
            "changed": {n: {"before": a, "after": b} for n, (a, b) in self.changed.items()},
        }

    def __str__(self) -> str:
        """One line a variable, as ``%checkpoint diff`` prints it (and ``print(jupyter_ckpt.diff())``)."""

        def kind(info: dict[str, Any]) -> str:
            return f"{info.get('type')} ({human_bytes(info.get('size'))})"

        lines = [f"+ {name}: {kind(info)}" for name, info in self.added.items()]
        lines += [f"- {name}: {kind(info)}" for name, info in self.removed.items()]
        lines += [f"~ {name}: {kind(a)} -> {kind(b)}" for name, (a, b) in self.changed.items()]
        return "\n".join(lines) or "no differences"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """How IPython shows ``jupyter_ckpt.diff()`` at the end of a cell: as ``%checkpoint diff`` prints it."""
        printer.text(str(self))


def diff_manifests(before: Manifest, after: Manifest) -> Diff:
    """Variables added, removed and changed between two manifests (or captures shaped like them)."""
    a: dict[str, dict[str, Any]] = {
        **before["variables"],
        **{m: _module_entry(v) for m, v in before["modules"].items()},
    }
    b: dict[str, dict[str, Any]] = {**after["variables"], **{m: _module_entry(v) for m, v in after["modules"].items()}}
    return Diff(
        added={n: b[n] for n in sorted(set(b) - set(a))},
        removed={n: a[n] for n in sorted(set(a) - set(b))},
        changed={n: (a[n], b[n]) for n in sorted(set(a) & set(b)) if a[n].get("gkey") != b[n].get("gkey")},
    )


def _module_entry(modname: str) -> dict[str, Any]:
    return {"type": "module", "gkey": f"module:{modname}", "size": 0, "repr": f"<module {modname!r}>"}

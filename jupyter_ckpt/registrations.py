"""What the cells registered with an imported library: a notebook class made a pandas accessor
(``@pd.api.extensions.register_dataframe_accessor("geo")``) or a virtual subclass of a library's abstract
class (``collections.abc.Sequence.register(Rows)``), a colormap a variable holds registered with matplotlib
(``matplotlib.colormaps.register(cmap)``), a notebook class made a matplotlib projection or scale
(``register_projection(PolarLike)``) or a pandas extension dtype, and a function a variable holds registered
for a class with ``copyreg`` (``copyreg.pickle(Point, reduce_point)``: how ``pickle``, ``multiprocessing`` and
``joblib`` then take a ``Point``) or with IPython's display
(``get_ipython().display_formatter.formatters["text/plain"].for_type(Money, show)``: how a later cell's output
shows a ``Money``).

Such a registration lives in the library, not in a variable, and a fresh kernel's imports do not make it
again: a restore into one would bring the class back without ``df.geo`` or ``isinstance(rows, Sequence)``.
A checkpoint records each registration of a class (or colormap) that is a variable of the notebook, by the
variable's name, as plain data in the manifest: the class itself is saved with the variables, so a restore registers
the very class it brought back. Registrations an imported module makes come back with its import, and
are not recorded.

A restore makes again those the kernel lacks, once the variables are back. It never takes one away: a
library offers no way to, so a registration made after the checkpoint stays. Reading walks the process's
classes for abstract ones (about 6 ms with pandas, scikit-learn and matplotlib imported): it runs in the
writer, never in the kernel's pause, and only when the namespace holds a class of the notebook's.
"""

from __future__ import annotations

import abc
import copy
import copyreg
import importlib
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from . import serialize

# [kind, target, key, variable]: ["accessor", "pandas:DataFrame", "geo", "Geo"] is ``df.geo``, made of the class
# in the variable ``Geo``; ["abc", "collections.abc:Sequence", "", "Rows"] is ``Sequence.register(Rows)``;
# ["colormap", "matplotlib:colormaps", "mine", "cmap"] is ``matplotlib.colormaps.register(cmap)`` (named "mine");
# ["copyreg", "copyreg:dispatch_table", "Point", "reduce_point"] is ``copyreg.pickle(Point, reduce_point)``, of the
# class in the variable ``Point`` or, named ``module:qualname``, one an import finds; ["formatter",
# "IPython:text/plain", "Money", "show"] is ``formatters["text/plain"].for_type(Money, show)``, of the shell's;
# ["projection", "matplotlib:projections", "polar_like", "PolarLike"] is ``register_projection(PolarLike)``, and
# likewise a matplotlib scale and a pandas extension dtype (``_NAMED``).
Registration = list[str]

# The pandas classes that take accessors, and the call that registers one on each.
_PANDAS = {
    "DataFrame": "register_dataframe_accessor",
    "Series": "register_series_accessor",
    "Index": "register_index_accessor",
}


def read(variables: dict[str, Any], notebook: str) -> list[Registration]:
    """The registrations of the classes among ``variables`` defined in the module named ``notebook``.

    Never raises: a checkpoint whose registrations cannot be read keeps none (and still keeps the variables).
    """
    classes: dict[int, str] = {}
    for name in sorted(variables, reverse=True):  # a class bound to two names is registered under the first
        value = variables[name]
        if isinstance(value, type) and value.__module__ == notebook:
            classes[id(value)] = name
    try:
        found = [*_colormaps(variables), *_functions_for_classes(variables, classes)]
        if classes:
            found += [*_accessors(classes), *_library_names(classes), *_virtual_subclasses(classes, notebook)]
        return sorted(found)
    except Exception:
        return []


def _colormaps(variables: dict[str, Any]) -> Iterator[Registration]:
    """The colormaps the cells registered with matplotlib (``matplotlib.colormaps.register(cmap)``, then
    ``cmap="mine"``) that a variable holds: a fresh kernel has only matplotlib's own."""
    colors = sys.modules.get("matplotlib.colors")
    registry = getattr(sys.modules.get("matplotlib"), "colormaps", None)
    if colors is None or registry is None:
        return
    held: dict[str, str] = {}
    for name in sorted(variables, reverse=True):  # one registered from two variables: under the first
        value = variables[name]
        if isinstance(value, colors.Colormap):
            held[value.name] = name
    builtin = getattr(registry, "_builtin_cmaps", ())
    for key, name in sorted(held.items()):
        # A copy of the variable's: comparing fills a colormap's lookup table, which its pickling then writes (a
        # kernel that writes its checkpoints itself listed it, and its group, as changed after its first one).
        if key in registry and key not in builtin and registry[key] == copy.copy(variables[name]):
            yield ["colormap", "matplotlib:colormaps", key, name]


# The registries of classes by name that a library keeps: each kind's target, and the module that holds it.
_NAMED = {
    "projection": ("matplotlib:projections", "matplotlib.projections"),
    "scale": ("matplotlib:scale", "matplotlib.scale"),
    "extension dtype": ("pandas:api.extensions", "pandas.core.dtypes.base"),
}


def _named_classes(kind: str, module: Any) -> tuple[dict[str, type], Callable[[type], None]]:
    """A library's registry of classes by name, as ``{name: class}``, and how a class is put in it in the place of
    the one of its name (the class a restore replaced): a matplotlib projection (``register_projection``, then
    ``add_subplot(projection="polar_like")``) or scale (``register_scale``, then ``set_xscale("square")``), a
    pandas extension dtype (``@register_extension_dtype``, then ``astype("unit")``)."""
    if kind == "projection":
        return dict(module.projection_registry._all_projection_types), module.register_projection
    if kind == "scale":
        return dict(module._scale_mapping), module.register_scale
    dtypes = module._registry.dtypes

    def put(klass: type) -> None:
        named = [i for i, c in enumerate(dtypes) if vars(c).get("name") == vars(klass).get("name")]
        if named:
            dtypes[named[0]] = klass
        else:
            dtypes.append(klass)  # as ``register_extension_dtype`` does

    return {c.__dict__["name"]: c for c in dtypes if isinstance(vars(c).get("name"), str)}, put


def _library_names(classes: dict[int, str]) -> Iterator[Registration]:
    """The notebook's classes a library's registry of classes by name holds (``_NAMED``): a fresh kernel has only
    the library's own."""
    for kind, (target, module) in _NAMED.items():
        if module in sys.modules:
            registry, _ = _named_classes(kind, sys.modules[module])
            for key, klass in sorted(registry.items()):
                if id(klass) in classes:
                    yield [kind, target, key, classes[id(klass)]]


def _functions_for_classes(variables: dict[str, Any], classes: dict[int, str]) -> Iterator[Registration]:
    """The functions of ``variables`` the cells registered for a class of ``classes``, or one an import finds, with
    ``copyreg`` or IPython's display formatters: a fresh kernel has only what its imports register."""
    held = {id(variables[name]): name for name in sorted(variables, reverse=True)}  # under the first name
    for kind, target, table in _function_tables():
        for klass, function in list(table.items()):
            name = held.get(id(function))
            if name is not None and isinstance(klass, type):
                owner = classes.get(id(klass)) or serialize.path_of(klass)
                if owner is not None:
                    yield [kind, target, owner, name]


def _function_tables() -> Iterator[tuple[str, str, dict[type, Any]]]:
    """Each table of functions by class a registration goes in: copyreg's, and each display formatter's of the
    IPython shell this process runs (by its kind of output)."""
    yield "copyreg", "copyreg:dispatch_table", copyreg.dispatch_table
    formatters = getattr(getattr(serialize._the_shell(), "display_formatter", None), "formatters", None)
    for mime, formatter in sorted((formatters or {}).items()):
        yield "formatter", f"IPython:{mime}", getattr(formatter, "type_printers", {})


def _accessors(classes: dict[int, str]) -> Iterator[Registration]:
    pandas = sys.modules.get("pandas")
    for owner_name in _PANDAS if pandas is not None else ():
        owner = getattr(pandas, owner_name, None)
        for key in sorted(getattr(owner, "_accessors", ())):
            accessor = getattr(vars(owner).get(key), "_accessor", None)
            if id(accessor) in classes:
                yield ["accessor", f"pandas:{owner_name}", key, classes[id(accessor)]]


def _virtual_subclasses(classes: dict[int, str], notebook: str) -> Iterator[Registration]:
    for abstract in _library_abcs(notebook):
        for registered in _registry(abstract):
            if id(registered) in classes and (path := serialize.path_of(abstract)) is not None:
                yield ["abc", path, "", classes[id(registered)]]


def _library_abcs(notebook: str) -> Iterator[type]:
    """Every abstract class of the process not defined in the notebook (whose own registry is saved with it)."""
    seen: set[int] = set()
    waiting: list[type] = [object]
    while waiting:
        subclasses: list[type] = type.__subclasses__(waiting.pop())
        for sub in subclasses:
            if id(sub) not in seen:
                seen.add(id(sub))
                waiting.append(sub)
                if isinstance(sub, abc.ABCMeta) and sub.__module__ != notebook:
                    yield sub


def _registry(abstract: type) -> list[type]:
    """The classes registered with ``abstract`` (``ABCMeta.register``): CPython's C registry, or ``_py_abc``'s."""
    py_registry = getattr(abstract, "_abc_registry", None)
    if py_registry is not None:
        return list(py_registry)
    try:
        import _abc

        refs = _abc._get_dump(abstract)[0]
    except (ImportError, AttributeError, TypeError):
        return []
    return [klass for ref in refs if (klass := ref()) is not None]


def label(registration: Registration) -> str:
    """How a registration is named on the timeline and in a restore's report."""
    kind, target, key, variable = registration
    owner = target.replace(":", ".")
    if kind == "accessor":
        return f"{owner}.{key} (accessor {variable})"
    if kind in ("copyreg", "formatter"):
        return f"{variable} registered with {owner} for {key.replace(':', '.')}"
    return f"{variable} registered with {owner}"


def apply(registrations: list[Registration], namespace: dict[str, Any]) -> dict[str, str]:
    """Make again each registration the process lacks, of what is now in ``namespace`` under its variable's
    name. Returns those that could not be made, by label, with why; never raises."""
    failed: dict[str, str] = {}
    for registration in registrations:
        kind, target, key, variable = registration
        held = namespace.get(variable)
        try:
            if kind == "colormap" and target == "matplotlib:colormaps":
                registry = importlib.import_module("matplotlib").colormaps
                if key not in registry:
                    registry.register(held, name=key)
                continue
            if kind in ("copyreg", "formatter"):
                tables = {t: table for _, t, table in _function_tables()}
                klass = serialize.find(key) if ":" in key else namespace.get(key)
                if target not in tables or not isinstance(klass, type) or not callable(held):
                    raise TypeError(f"no {target} here, or {key} is not a class or {variable} not a function")
                if tables[target].get(klass) is not held:
                    tables[target][klass] = held  # as copyreg.pickle and for_type put it
                continue
            if not isinstance(held, type):
                raise TypeError(f"{variable} is not a class in this kernel")
            if kind in _NAMED and target == _NAMED[kind][0]:
                registry, put = _named_classes(kind, importlib.import_module(_NAMED[kind][1]))
                if registry.get(key) is not held:
                    put(held)  # under its ``name``, the key it was read under
                continue
            owner, pandas_class = serialize.find(target), target.removeprefix("pandas:")
            if kind == "accessor" and pandas_class != target and pandas_class in _PANDAS:
                if getattr(vars(owner).get(key), "_accessor", None) is not held:
                    register = getattr(importlib.import_module("pandas.api.extensions"), _PANDAS[pandas_class])
                    with warnings.catch_warnings():  # "overriding a preexisting attribute": the old class's
                        warnings.simplefilter("ignore", UserWarning)
                        register(key)(held)
            elif kind == "abc" and isinstance(owner, abc.ABCMeta):
                owner.register(held)
            else:
                raise ValueError("this version of jupyter-ckpt does not make such a registration")
        except Exception as e:
            failed[label(registration)] = f"not registered again: {type(e).__name__}: {e}"
    return failed

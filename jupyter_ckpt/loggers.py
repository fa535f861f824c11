"""The logging set-up the cells made: ``logging.basicConfig(level=logging.INFO)``,
``logging.getLogger("urllib3").setLevel(logging.WARNING)``, a handler that writes to a file.

Loggers live in the ``logging`` module, not in variables, and a fresh kernel starts without the set-up
the session made: a restore into one printed none of the messages the notebook logged. A checkpoint
keeps, as plain data in the manifest, each logger the session changed since jupyter-ckpt was loaded
(``Start``: its level, whether it propagates, whether it is disabled, its handlers), the names the
cells gave levels (``logging.addLevelName(25, "NOTICE")``), the loggers made of a notebook class
(``logging.setLoggerClass(AppLogger)``) and that class, and ``logging.disable``'s level:

- a handler writing to the notebook's output (``sys.stdout``, ``sys.stderr``, as ``basicConfig`` makes)
  or to a file, with no formatter or a ``logging.Formatter``, is kept as plain data: its level and its
  formatter's format, date format and style;
- a handler a variable of the notebook holds (``handler = ListHandler(records)`` then
  ``log.addHandler(handler)``, a ``StreamHandler`` on a ``StringIO``) is kept as that variable's name:
  the variable is pickled with the rest, and the restored object is put back on its logger; one of a
  class the notebook defined that no variable holds is not kept, and a restore takes it off;
- any other handler (a ``NullHandler``, a rotating file, a queue, one with a formatter of a class of its
  own) is neither kept nor removed: libraries add such handlers to their own loggers as they are
  imported (torch, with its own formatter), and cannot be told from a cell's, and such a handler may
  hold what plain data cannot.

A whole restore (an undo too) makes the loggers what they were at the checkpoint: each kept logger as
kept, reusing a handler it already has that is kept the same (so an undo keeps the objects), and each
logger this kernel's session changed and the checkpoint does not keep back as it was at the start, but
one made since by a module imported since (an undo leaves the module imported, set up as it set itself
up). A
file handler is opened again to append, never to truncate the log; one that cannot be opened (its
directory is gone) is named in the report, and the rest is set.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import Any

LOGGING = "logging"  # how the timeline's changed column names the loggers

# What each handler kind writes to, as a stream the restoring kernel has: the notebook's output, or the
# kernel's own (its log, not the notebook).
_STREAMS = ("stdout", "stderr", "__stdout__", "__stderr__")

# (level, propagate, disabled, handlers) of a logger.
Config = tuple[int, bool, bool, tuple[logging.Handler, ...]]
_UNSET: Config = (logging.NOTSET, True, False, ())


@dataclass(frozen=True)
class Start:
    """The loggers a kernel had when jupyter-ckpt was loaded in it, and the level ``logging.disable`` set."""

    loggers: dict[str, Config]
    disable: int
    levels: dict[int, str]  # the names of the levels (``logging.addLevelName``)

    @classmethod
    def now(cls) -> Start:
        loggers = {name: _config(logger, {}) for name, logger in _loggers().items()}
        return cls(loggers, logging.root.manager.disable, _level_names())


def holders(notebook: dict[str, Any]) -> dict[int, str]:
    """The handlers the notebook's variables hold: the name of one of the variables holding each, by id."""
    # Its type, not ``isinstance``: that asks a weak proxy for its object's class, which a dead one raises.
    return {id(value): name for name, value in notebook.items() if issubclass(type(value), logging.Handler)}


def read(start: Start, notebook: dict[str, Any]) -> dict[str, Any]:
    """How the session changed the loggers since ``start``: ``loggers`` (by name, ``root`` for the root one)
    and ``disable``, each only if it changed. ``notebook`` is the variables the checkpoint keeps. Never
    raises: loggers that cannot be read are not kept."""
    found: dict[str, Any] = {}
    try:
        held = holders(notebook)
        changed = {
            name: _plain(logger, held)
            for name, logger in _loggers().items()
            if _config(logger, held) != start.loggers.get(name, _UNSET)
        }
        disable = logging.root.manager.disable
        levels = [[level, name] for level, name in sorted(_level_names().items()) if start.levels.get(level) != name]
        classes = _notebook_classes(notebook)
        made = {name: classes[id(type(logger))] for name, logger in _loggers().items() if id(type(logger)) in classes}
        default = classes.get(id(logging.getLoggerClass()))
    except Exception:
        return found
    if changed:
        found["loggers"] = dict(sorted(changed.items()))
    if disable != start.disable:
        found["disable"] = disable
    if levels:
        found["levels"] = levels
    if made:
        found["classes"] = dict(sorted(made.items()))
    if default is not None:
        found["logger_class"] = default
    return found


def _notebook_classes(notebook: dict[str, Any]) -> dict[int, str]:
    """The ``Logger`` subclasses the notebook's variables hold (``logging.setLoggerClass(AppLogger)``): the name of
    one of the variables holding each, by id."""
    return {
        id(value): name
        for name, value in sorted(notebook.items(), reverse=True)  # under the first name
        if isinstance(value, type) and issubclass(value, logging.Logger) and value is not logging.Logger
    }


def _level_names() -> dict[int, str]:
    return dict(logging._levelToName)


def apply(
    kept: dict[str, Any] | None, start: Start, notebook: dict[str, Any], before: dict[int, str]
) -> dict[str, str]:
    """Make the loggers those ``kept`` describes, and those this kernel's session changed that it does not
    describe what they were at ``start``. ``notebook`` is the restored namespace, and ``before`` the
    handlers its variables held before the restore (``holders``): those are the notebook's, to take off
    their loggers unless kept. Returns the handlers that could not be made, by label, with why; never
    raises. A checkpoint older than logging (``kept`` None) leaves them alone."""
    failed: dict[str, str] = {}
    if kept is None:
        return failed
    held = holders(notebook)
    ours = before | held
    described = kept.get("loggers", {})
    for name, logger in _loggers().items():
        if name in described or _config(logger, ours) == start.loggers.get(name, _UNSET):
            continue
        if name in start.loggers or not _of_a_module(name):
            _set(logger, start.loggers.get(name, _UNSET), ours)
    for name, plain in described.items():
        logger = logging.getLogger(None if name == "root" else name)
        handlers = []
        for kept_handler in plain["handlers"]:
            try:
                handlers.append(_handler(kept_handler, logger, notebook, held))
            except Exception as e:  # a file that cannot be opened, a variable not restored
                failed[f"logging handler {_where(kept_handler)} of logger {name!r}"] = f"not made again: {e}"
        _set(logger, (plain["level"], plain["propagate"], plain["disabled"], tuple(handlers)), ours)
    logging.disable(kept.get("disable", start.disable))
    for level, name in kept.get("levels", []):  # a name given since is kept: logging cannot take one away
        if logging.getLevelName(level) != name:
            logging.addLevelName(level, name)
    # A logger made of a class of the notebook's (``setLoggerClass``) is made again by ``getLogger`` as the variables
    # load, of the class logging had then: it is given the restored class, and logging makes new ones of it again.
    for name, variable in kept.get("classes", {}).items():
        klass = notebook.get(variable)
        logger = logging.getLogger(None if name == "root" else name)
        if isinstance(klass, type) and issubclass(klass, logging.Logger) and type(logger) is not klass:
            logger.__class__ = klass
    default = notebook.get(kept.get("logger_class", ""))
    if isinstance(default, type) and issubclass(default, logging.Logger):
        logging.setLoggerClass(default)
    return failed


def _loggers() -> dict[str, logging.Logger]:
    """Every logger of the process by name, the root one as ``root``; placeholders (a name only a longer
    name made) are not loggers."""
    found: dict[str, logging.Logger] = {"root": logging.root}
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):
            found[name] = logger
    return found


def _of_a_module(name: str) -> bool:
    """Whether a logger is named after a module imported here (``torch._dynamo``), not the notebook's: one
    made since the start is then that module's, set up as it was imported, and stays so while it does."""
    top = name.partition(".")[0]
    return top in sys.modules and top != "__main__"


def _the_notebooks(handler: logging.Handler, held: dict[int, str]) -> bool:
    """Whether a restore sets this handler: kept as plain data or as a variable, or of a notebook class."""
    return _plain_handler(handler, held) is not None or type(handler).__module__ == "__main__"


def _config(logger: logging.Logger, held: dict[int, str]) -> Config:
    handlers = tuple(h for h in logger.handlers if _the_notebooks(h, held))
    return (logger.level, logger.propagate, logger.disabled, handlers)


def _set(logger: logging.Logger, config: Config, held: dict[int, str]) -> None:
    level, propagate, disabled, handlers = config
    logger.setLevel(level)  # clears the loggers' caches of levels
    logger.propagate, logger.disabled = propagate, disabled
    logger.handlers[:] = [h for h in logger.handlers if not _the_notebooks(h, held)] + list(handlers)


def _plain(logger: logging.Logger, held: dict[int, str]) -> dict[str, Any]:
    handlers = [plain for h in logger.handlers if (plain := _plain_handler(h, held)) is not None]
    return {"level": logger.level, "propagate": logger.propagate, "disabled": logger.disabled, "handlers": handlers}


def _plain_handler(handler: logging.Handler, held: dict[int, str]) -> dict[str, Any] | None:
    """A handler as plain data, or None if it is not one kept (see above); ``held`` is ``holders``'s."""
    if (variable := held.get(id(handler))) is not None:
        return {"kind": "variable", "name": variable}
    formatter = handler.formatter
    if formatter is None:
        found: dict[str, Any] = {"level": handler.level, "formatter": None}
    elif type(formatter) is logging.Formatter:
        styles: dict[str, tuple[type, str]] = logging._STYLES  # type: ignore[assignment]  # classes, not instances
        style = next((k for k, (cls, _) in styles.items() if type(formatter._style) is cls), "%")
        found = {
            "level": handler.level,
            "formatter": {"format": formatter._fmt, "datefmt": formatter.datefmt, "style": style},
        }
    else:
        return None
    if isinstance(handler, logging.FileHandler) and type(handler) is logging.FileHandler:
        return {"kind": "file", "path": handler.baseFilename, "encoding": handler.encoding, **found}
    if isinstance(handler, logging.StreamHandler) and type(handler) is logging.StreamHandler:
        stream = next((name for name in _STREAMS if getattr(sys, name, None) is handler.stream), None)
        if stream is not None:
            return {"kind": "stream", "stream": stream, **found}
    return None


def _where(plain: dict[str, Any]) -> str:
    """What a kept handler is, as a report names it."""
    if plain["kind"] == "variable":
        return f"held by variable {plain['name']!r}"
    return f"to sys.{plain['stream']}" if plain["kind"] == "stream" else f"to {plain['path']}"


def _handler(
    plain: dict[str, Any], logger: logging.Logger, notebook: dict[str, Any], held: dict[int, str]
) -> logging.Handler:
    """The handler ``plain`` describes: the restored variable's, one ``logger`` has that is kept the same,
    else a new one."""
    if plain["kind"] == "variable":
        restored = notebook.get(plain["name"])
        if not isinstance(restored, logging.Handler):
            raise LookupError("the variable was not restored")
        return restored
    same = next((h for h in logger.handlers if _plain_handler(h, held) == plain), None)
    if same is not None:
        return same
    handler: logging.Handler
    if plain["kind"] == "stream":
        handler = logging.StreamHandler(getattr(sys, plain["stream"]))
    else:
        handler = logging.FileHandler(plain["path"], mode="a", encoding=plain["encoding"])  # never truncated
    handler.setLevel(plain["level"])
    if (formatter := plain["formatter"]) is not None:
        handler.setFormatter(logging.Formatter(formatter["format"], formatter["datefmt"], formatter["style"]))
    return handler

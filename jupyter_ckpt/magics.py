"""``%checkpoint`` (alias ``%ckpt``): the timeline of kernel checkpoints from the IPython prompt."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, Protocol

from IPython.core import magic_arguments as _untyped
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class

from .checkpointer import Checkpointer
from .errors import CheckpointError, reading_store
from .format import describe_policy, describe_usage, format_table, format_thinned
from .session import SessionKey
from .timeline import numbers
from .units import human_bytes, parse_size, read_negative_sizes

# IPython.core.magic_arguments is unannotated: the functions used here, with their types.
_Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]
magic_arguments: Callable[[], _Decorator] = _untyped.magic_arguments
argument: Callable[..., _Decorator] = _untyped.argument
# How IPython splits a magic's line into arguments (quotes kept: ``unquoted``).
arg_split: Callable[[str], list[str]] = _untyped.arg_split  # type: ignore[attr-defined]  # not re-exported


class Hooks(Protocol):
    """What the magics use of the extension's cell hooks: its Checkpointer, the flag a restore sets, and the
    session with how it was chosen."""

    ckpt: Checkpointer
    skip_cell: bool
    session: SessionKey

    def name_session(self, name: str) -> SessionKey: ...


@magics_class
class CheckpointMagics(Magics):
    def __init__(self, shell: Any, hooks: Hooks) -> None:
        super().__init__(shell)
        self._hooks = hooks

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            with reading_store(self.ckpt.store.root):
                yield
        except CheckpointError as e:
            raise UsageError(str(e)) from None

    @property
    def ckpt(self) -> Checkpointer:
        return self._hooks.ckpt

    def _no_stray_options(self, opts: argparse.Namespace) -> None:
        """An option given to a command that does not take it (``save --replay``, ``list --only x``) is refused,
        not ignored: the user meant something by it."""
        takes = OPTIONS_OF.get(opts.command, ())
        stray = [
            flag
            for dest, flag in OPTION_FLAGS.items()
            if dest not in takes and getattr(opts, dest) not in (None, False)
        ]
        if stray:
            accepted = ", ".join(OPTION_FLAGS[d] for d in takes) if takes else "no options"
            raise UsageError(
                f"{', '.join(stray)} {'does' if len(stray) == 1 else 'do'} not go with %checkpoint {opts.command}, "
                f"which takes {accepted}"
            )

    def _no_args(self, opts: argparse.Namespace) -> None:
        if opts.args:
            raise UsageError(f"%checkpoint {opts.command} takes no arguments, got {' '.join(opts.args)!r}")

    def _one_ref(self, opts: argparse.Namespace, default: str | None = None) -> str:
        if len(opts.args) > 1 or (not opts.args and default is None):
            raise UsageError(f"%checkpoint {opts.command} takes one REF")
        return opts.args[0] if opts.args else str(default)

    def _save(self, opts: argparse.Namespace) -> None:
        self._no_args(opts)
        cid = self.ckpt.save(trigger="manual", message=opts.message, tag=opts.tag)
        assert cid is not None  # a manual checkpoint is written before save returns
        print(f"kernel checkpoint {self._name(cid)} saved" + (f" as {opts.tag!r}" if opts.tag else ""))

    def _name(self, checkpoint_id: int) -> str:
        """``#N (id I)``: the number users see first, the store-wide id beside it."""
        return f"#{self.ckpt.timeline.number(self.ckpt.session, checkpoint_id)} (id {checkpoint_id})"

    def _list(self, opts: argparse.Namespace) -> None:
        self._no_args(opts)
        if opts.all and opts.n is not None:  # -n was ignored
            raise UsageError("%checkpoint list takes -n N (the last N) or --all, not both")
        n = 20 if opts.n is None else opts.n
        if n < 1:
            raise UsageError("-n must be at least 1")
        records = self.ckpt.checkpoints()
        print(format_table(records if opts.all else records[-n:], self.ckpt.head, numbers(records)))

    def _restore(self, opts: argparse.Namespace) -> None:
        ref = self._one_ref(opts, "latest")
        report = self.ckpt.restore(ref, only=opts.only, replay_mode="auto" if opts.replay else None)
        self._hooks.skip_cell = opts.only is None
        print(report.summary())

    def _replay(self, opts: argparse.Namespace) -> None:
        self._no_args(opts)
        for name, outcome in sorted(self.ckpt.replay().items()):
            print(f"{name}: {outcome}")

    def _undo(self, opts: argparse.Namespace) -> None:
        self._no_args(opts)
        report = self.ckpt.undo()
        self._hooks.skip_cell = True
        print(report.summary())

    def _diff(self, opts: argparse.Namespace) -> None:
        if len(opts.args) > 2:
            raise UsageError("%checkpoint diff takes at most two REFs")
        print(self.ckpt.diff(*opts.args))

    def _auto(self, opts: argparse.Namespace) -> None:
        if len(opts.args) != 1 or opts.args[0] not in ("on", "off", "budget"):
            raise UsageError("usage: %checkpoint auto on|off|budget [--every N] [--interval SECONDS]")
        if opts.args[0] != "on" and (opts.every is not None or opts.interval is not None):
            raise UsageError(f"--every and --interval go with %checkpoint auto on, not {opts.args[0]}")
        if opts.args[0] == "off":
            policy = self.ckpt.set_policy(auto=False)
        elif opts.args[0] == "budget":  # the default: every cell, within the overhead budget
            policy = self.ckpt.set_policy(auto=True, every=None, interval=None)
        else:
            every = opts.every if opts.every is not None or opts.interval is not None else 1
            policy = self.ckpt.set_policy(auto=True, every=every, interval=opts.interval)
        print(f"auto checkpoints: {describe_policy(policy.__dict__)}")

    def _status(self, opts: argparse.Namespace) -> None:
        self._no_args(opts)
        s = self.ckpt.status()
        age = s["last_checkpoint_age"]
        lines = [
            f"store: {s['store']}",
            f"session: {self._hooks.session.describe()}",
            f"policy: {describe_policy(s['policy'])}",
            f"checkpoints: {s['checkpoints']} ({human_bytes(s['bytes'])})",
            f"store size: {describe_usage(s['usage'])}",
            f"last checkpoint: {'never' if age is None else f'{age:.0f} s ago'}",
            f"writing: {'yes' if s['writing'] else 'no'}",
            f"newest checkpoint behind by: {s['schedule']['behind_s']:.1f} s of execution",
            f"checkpoint overhead: {s['schedule']['spent_s']:.2f} s over {s['schedule']['executed_s']:.2f} s of "
            f"execution ({s['schedule']['overhead']:.1%})",
        ]
        for reason, count in sorted(s["schedule"]["skipped"].items()):
            lines.append(f"cells not checkpointed: {count} ({reason})")
        if s["remote"] is not None:
            r = s["remote"]
            lines.append(
                f"remote: {r['url']}: {r['behind']} checkpoints ({human_bytes(r['behind_bytes'])}) not uploaded yet"
                + (f"; {r['error']}" if r["error"] else "")
            )
        if s["writer_stopped"]:
            lines.append(
                f"writer stopped for memory: {s['writer_stopped']}; since then, while the kernel's memory "
                "could not be copied beside a writer, checkpoints are written in the kernel when it is idle"
            )
        if s["no_room"]:
            lines.append(f"not stored for want of room: {s['no_room']}; %checkpoint wait tries it again")
        if s["retention_error"]:
            lines.append(f"thinning failed: {s['retention_error']}")
        if s["policy"]["exclude"]:
            lines.append("excluded: " + ", ".join(s["policy"]["exclude"]))
        for name, reason in sorted(s["skipped"].items()):
            lines.append(f"skipped: {name}: {reason}")
        print("\n".join(lines))

    def _exclude(self, opts: argparse.Namespace) -> None:
        if not opts.args:
            raise UsageError("%checkpoint exclude needs at least one NAME")
        print("excluded: " + (", ".join(self.ckpt.exclude(opts.args).exclude) or "nothing"))
        undefined = [name for name in dict.fromkeys(opts.args) if name not in vars(self.ckpt.module)]
        if undefined:  # a typo would otherwise go unnoticed until the variable is checkpointed after all
            print(f"not defined now: {', '.join(undefined)} (kept out of checkpoints once defined)")

    def _include(self, opts: argparse.Namespace) -> None:
        if not opts.args:
            raise UsageError("%checkpoint include needs at least one NAME")
        was = set(self.ckpt.policy.exclude)
        print("excluded: " + (", ".join(self.ckpt.include(opts.args).exclude) or "nothing"))
        never = [name for name in dict.fromkeys(opts.args) if name not in was]
        if never:  # nothing to put back: a typo, or a name that was never kept out
            print(
                f"not excluded before: {', '.join(never)} (nothing changed for {'it' if len(never) == 1 else 'them'})"
            )

    def _history(self, opts: argparse.Namespace) -> None:
        ref = self._one_ref(opts, "") if opts.args else None
        for cell in self.ckpt.history(ref):
            print(f"[{cell['count']}] {cell['status']} {cell['duration']:.2f}s")
            print("    " + cell["source"].replace("\n", "\n    "))

    def _timeline(self, opts: argparse.Namespace) -> Any:
        from .widget import Timeline

        self._no_args(opts)
        return Timeline(self.ckpt)

    def _delete(self, opts: argparse.Namespace) -> None:
        gone = self.ckpt.delete(self._one_ref(opts))
        tagged = f" tagged {gone.tag!r}" if gone.tag else ""
        print(f"kernel checkpoint (id {gone.id}){tagged} deleted (its data goes at the next gc)")

    def _gc(self, opts: argparse.Namespace) -> None:
        self._no_args(opts)
        keep_last = 20 if opts.keep_last is None else opts.keep_last
        max_size = parse_size(opts.max_size) if opts.max_size is not None else None  # '' is no size
        thinned = self.ckpt.gc(keep_last=keep_last, max_size=max_size, everywhere=opts.all)
        if opts.all:
            print(format_thinned(thinned, self.ckpt.store.size(), max_size, keep_last))
        else:  # what it thinned, and what --max-size bounds: this notebook's checkpoints
            print(format_thinned(thinned, self.ckpt.own_bytes(), max_size, keep_last, "this notebook"))

    def _wait(self, opts: argparse.Namespace) -> None:
        self._no_args(opts)
        self.ckpt.settle()

    def _session(self, opts: argparse.Namespace) -> None:
        if len(opts.args) > 1:
            raise UsageError("%checkpoint session takes one NAME (quote a path with spaces)")
        if opts.args:
            self._hooks.name_session(opts.args[0])
        print(f"session: {self._hooks.session.describe()}")

    def _tag(self, opts: argparse.Namespace) -> None:
        if not opts.tag:
            raise UsageError("usage: %checkpoint tag REF -t NAME")
        record = self.ckpt.tag(self._one_ref(opts, "latest"), opts.tag)
        print(f"kernel checkpoint {self._name(record.id)} tagged {record.tag!r}")

    def _untag(self, opts: argparse.Namespace) -> None:
        record = self.ckpt.resolve(self._one_ref(opts))
        if record.tag is None:
            print(f"kernel checkpoint {self._name(record.id)} has no tag (nothing changed)")
            return
        self.ckpt.tag(record.id, None)
        print(f"kernel checkpoint {self._name(record.id)} untagged (it was {record.tag!r}; thinning may take it now)")

    # The commands of %checkpoint, in the order its help lists them: what each does, and the method that does it.
    COMMANDS: ClassVar[dict[str, tuple[str, Callable[[CheckpointMagics, argparse.Namespace], Any]]]] = {
        "save": ("checkpoint now (the default)", _save),
        "list": ("the timeline as a table", _list),
        "restore": ("roll the namespace back to REF", _restore),
        "undo": ("back to the state before the last cell", _undo),
        "diff": ("variables added, removed and changed between two REFs, or since one", _diff),
        "auto": ("the automatic policy: on, off or budget", _auto),
        "status": ("store, session, policy, count, bytes, what was skipped", _status),
        "exclude": ("keep variables out of checkpoints", _exclude),
        "include": ("put excluded variables back in", _include),
        "history": ("the cells executed up to REF", _history),
        "timeline": ("the timeline widget", _timeline),
        "delete": ("remove REF from the timeline", _delete),
        "gc": ("thin old checkpoints and drop unreferenced data", _gc),
        "wait": ("until the state the cells left is on disk", _wait),
        "tag": ("name REF (a savepoint)", _tag),
        "untag": ("take REF's tag away (thinning may take it then)", _untag),
        "replay": ("run the cells that rebuild what the last restore could not", _replay),
        "session": ("which session this kernel checkpoints into, or name it", _session),
    }

    @magic_arguments()
    @argument(
        "command",
        nargs="?",
        default="save",
        help="; ".join(f"{name}: {what}" for name, (what, _) in COMMANDS.items()),
    )
    @argument(
        "args",
        nargs="*",
        help="REF(s) for restore/diff/history/delete/tag/untag, on|off|budget for auto, NAMEs for exclude/include, "
        "the session's NAME (a notebook's path, or any name) for session",
    )
    @argument("-m", "--message", action="append", help="save: a note stored with the checkpoint")
    @argument(
        "-t",
        "--tag",
        action="append",
        help="save: name the checkpoint (a savepoint: never thinned away); tag: the new tag",
    )
    @argument("-n", type=int, action="append", help="list: show the last N checkpoints (default 20)")
    @argument(
        "--all",
        action="store_true",
        help="list: show every checkpoint of the session; gc: thin every notebook's checkpoints, not only this one's",
    )
    @argument("--only", action="append", help="restore: only these comma-separated variables")
    @argument(
        "--replay",
        action="store_true",
        help="restore: also rebuild the variables the checkpoint could not hold by running their cells again",
    )
    @argument("--every", type=int, action="append", help="auto: checkpoint after every Nth cell")
    @argument("--interval", type=float, action="append", help="auto: checkpoint once this many seconds have passed")
    @argument("--keep-last", type=int, action="append", help="gc: always keep the newest N checkpoints (default 20)")
    @argument(
        "--max-size",
        action="append",
        help="gc: then thin more old untagged checkpoints until this notebook's (with --all, the store) fit this "
        "size, e.g. 2G",
    )
    @line_magic
    def checkpoint(self, line: str) -> Any:
        """Kernel checkpoints: save the kernel's variables, browse their timeline, roll back.

        These are checkpoints of the kernel's state (its variables), not Jupyter's
        file checkpoints ("Save and Create Checkpoint"), which keep the notebook file.

        REF names a kernel checkpoint of this notebook:

        - ``#N``: its number in this notebook, from 1, as ``%checkpoint list`` and the
          sidebar show it (``#3``)
        - ``N``: its id, unique in the whole store (the ``id`` column)
        - a tag, ``latest``, ``last-good``, or ``-N`` (N states back)
        - ``previous``: the last good checkpoint another kernel left (before this
          one, or on another machine), still the same after this kernel has run cells

        Examples::

            %checkpoint                      # checkpoint now
            %checkpoint save -t baseline     # a savepoint named baseline
            %checkpoint list                 # the timeline
            %checkpoint restore baseline     # roll back to it
            %checkpoint untag baseline       # no longer a savepoint
            %checkpoint restore #3           # to this notebook's third checkpoint
            %checkpoint restore previous     # to where the last kernel left off
            %checkpoint undo                 # back to before the last cell
            %checkpoint replay               # rebuild what the last restore could not, from its cells
            %checkpoint diff                 # what changed since the last checkpoint
            %checkpoint auto budget          # every cell within the overhead budget (the default)
            %checkpoint auto on              # every cell, whatever it costs
            %checkpoint auto on --every 5    # checkpoint after every 5th cell
            %checkpoint auto on --interval 600
            %checkpoint exclude big_tmp
            %checkpoint gc --max-size 5G
            %checkpoint wait                 # the state the cells left is on disk
            %checkpoint session              # which session this kernel checkpoints into, and why
            %checkpoint session nightly      # go on in session "nightly" (a later kernel resumes it so)
        """
        try:
            # REFs and names after the options as well as before them: ``tag -t best 3`` was "unrecognized arguments: 3"
            opts = PARSER.parse_intermixed_args(arg_split(line))
        except ValueError as e:  # the shell-like splitting: an unbalanced quote
            raise UsageError(f"%checkpoint {line.strip()}: {e}") from None
        for name, value in vars(opts).items():  # each option is given once: ``--only x --only y`` kept only y
            if name in OPTION_FLAGS and isinstance(value, list):
                if len(value) > 1:
                    several = " (--only a,b for several variables)" if name == "only" else ""
                    raise UsageError(f"{OPTION_FLAGS[name]} is given {len(value)} times; give it once{several}")
                setattr(opts, name, value[0])
        for name, value in vars(opts).items():  # ``-t "my tag"``: IPython's splitting keeps the quotes
            setattr(opts, name, unquoted(value) if isinstance(value, str) else value)
        opts.args = [unquoted(a) for a in opts.args]
        if opts.command not in self.COMMANDS:
            raise UsageError(f"unknown %checkpoint command {opts.command!r}; one of: {', '.join(self.COMMANDS)}")
        self._no_stray_options(opts)
        _, run = self.COMMANDS[opts.command]
        with self._translated():
            return run(self, opts)


PARSER: argparse.ArgumentParser = CheckpointMagics.checkpoint.parser  # type: ignore[attr-defined]  # magic_arguments made it
read_negative_sizes(PARSER)

# Each option of %checkpoint as the user types it, and the commands that take it; any other command refuses it.
OPTION_FLAGS = {
    "message": "-m",
    "tag": "-t",
    "n": "-n",
    "all": "--all",
    "only": "--only",
    "replay": "--replay",
    "every": "--every",
    "interval": "--interval",
    "keep_last": "--keep-last",
    "max_size": "--max-size",
}
OPTIONS_OF = {
    "save": ("message", "tag"),
    "list": ("n", "all"),
    "restore": ("only", "replay"),
    "auto": ("every", "interval"),
    "gc": ("keep_last", "max_size", "all"),
    "tag": ("tag",),
}


def unquoted(text: str) -> str:
    """An argument without the quotes around it, which IPython's argument splitting keeps."""
    return text[1:-1] if len(text) > 1 and text[0] == text[-1] and text[0] in "'\"" else text

"""``jupyter ckpt``: inspect and maintain checkpoint stores outside any kernel."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, NoReturn, TextIO

from .config import default_store_dir, open_replica, open_store, store_location
from .errors import BadArgument, CheckpointError, IntegrityError, naming, reading_store
from .format import format_table, format_thinned
from .remote_catalog import RemoteCatalog
from .restore import diff_manifests, restore_namespace
from .retention import Limits, usage
from .serialize import as_main
from .session import session_name
from .store import Store
from .timeline import Timeline, numbers
from .units import human_bytes, parse_size, read_negative_sizes

EXTENSION = "jupyter_ckpt"
# Control characters but the line end and the tab, as escapes: what the command prints takes text from the catalog
# (a session's key, a tag, a message), which is not signed, and a terminal acts on an escape sequence it is sent
# (its title, its clipboard, a link).
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c not in (0x09, 0x0A)}


class _Escaped(io.TextIOBase):
    """A text stream that writes to ``stream`` with control characters escaped (``_CONTROLS``)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(text.translate(_CONTROLS))

    def flush(self) -> None:
        self._stream.flush()

    def fileno(self) -> int:
        return self._stream.fileno()


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors are one line like every other error of the command (exit 2), and that reads
    ``--max-size -5G`` as a (negative) size."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        read_negative_sizes(self)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"jupyter ckpt: error: {message} (see {self.prog} --help)\n")


class _Once(argparse.Action):
    """An option with a value, refused when given twice: argparse keeps the last one (``gc --max-size 1G --max-size
    5G`` thinned to 5G, ``--session a --session b`` read b)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
    ) -> None:
        given = f"_given_{self.dest}"
        if getattr(namespace, given, False):
            parser.error(f"{option} is given twice; give it once")
        setattr(namespace, given, True)
        setattr(namespace, self.dest, values)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="jupyter ckpt", description="Inspect and maintain jupyter-ckpt stores.")
    store_help = (
        f"store directory (default: {default_store_dir()}), or an object store URL such as s3://bucket/prefix "
        "(default: $JUPYTER_CKPT_URL), whose checkpoints are listed through the local directory"
    )
    p.add_argument("--store", action=_Once, default="", help=store_help)
    # --store after the command too (``jupyter ckpt verify --store DIR`` was "unrecognized arguments"): _main takes it.
    after = _Parser(add_help=False)
    after.add_argument("--store", dest="store_after", metavar="STORE", action=_Once, help=store_help)
    sub = p.add_subparsers(dest="command", required=True)
    ls = sub.add_parser("list", parents=[after], help="the sessions, or one session's checkpoints")
    ls.add_argument("session", nargs="?", help="a session key (the notebook path)")
    show = sub.add_parser("show", parents=[after], help="one checkpoint: metadata, variables, cells")
    show.add_argument("ref", help="checkpoint id, or a tag/latest/last-good with --session")
    show.add_argument("--session", action=_Once, help="session for a tag or latest")
    show.add_argument("--json", action="store_true", help="print the verified manifest as JSON")
    d = sub.add_parser("diff", parents=[after], help="variables added, removed and changed between two checkpoints")
    d.add_argument("a")
    d.add_argument("b")
    d.add_argument("--session", action=_Once)
    gc = sub.add_parser(
        "gc", parents=[after], help="thin old untagged checkpoints of every session and delete unreferenced blobs"
    )
    gc.add_argument("--session", action=_Once, help="thin only this session (a notebook path)")
    gc.add_argument(
        "--keep-last", type=int, default=20, action=_Once, help="newest checkpoints per session always kept"
    )
    gc.add_argument("--max-size", action=_Once, help="then thin more until the store fits, e.g. 5G")
    gc.add_argument(
        "--grace",
        action=_Once,
        type=float,
        default=24 * 3600,
        help="with an object store: seconds an unreferenced remote blob is kept (a writer may still be uploading)",
    )
    verify = sub.add_parser(
        "verify", parents=[after], help="check every signature and that the catalog and blobs agree"
    )
    verify.add_argument(
        "--repair",
        action="store_true",
        help="first write rows changed by hand back from their signed manifests, and delete the checkpoints whose "
        "manifest fails its check (no restore takes them, and no REF reaches them)",
    )
    ex = sub.add_parser("export", parents=[after], help="write a checkpoint as a file dill.load_module() reads")
    ex.add_argument("ref")
    ex.add_argument("file")
    ex.add_argument("--session", action=_Once)
    sub.add_parser("enable", help="load jupyter_ckpt in every IPython kernel of this user")
    sub.add_parser("disable", help="stop loading jupyter_ckpt in every kernel")
    return p


def _session(store: Store, name: str) -> str:
    """A session as the command line names it: its key, or a notebook's path as a kernel keys it (relative to
    the working directory, through links)."""
    if any(s["key"] == name for s in store.sessions()):
        return name
    return session_name(name)


def _cmd_list(store: Store, args: argparse.Namespace) -> None:
    if args.session:
        records = store.checkpoints(args.session)
        print(format_table(records, None, numbers(records)))
        return
    sessions = store.sessions()
    if not sessions:
        print(f"no sessions in {store.root}")
    for s in sessions:
        print(f"{s['key']}  {s['checkpoints']} checkpoint(s)  {human_bytes(s['bytes'])}")
    print(f"store {store.root}: {usage(store, Limits()).describe()}")


def _cmd_show(store: Store, args: argparse.Namespace) -> None:
    record = Timeline(store).find(args.ref, args.session)
    manifest = store.manifest(record.id)
    if args.json:
        print(json.dumps(manifest, indent=2, sort_keys=True))
        return
    print(format_table([record], None, numbers(store.checkpoints(record.session))))
    versions = sorted(manifest["versions"].items(), key=lambda item: item[0] != "python")  # Python first
    print("written by " + ", ".join(f"{name} {version}" for name, version in versions))
    for name, info in sorted(manifest["variables"].items()):
        print(f"  {name}: {info['type']} {human_bytes(info['size'])}  {info['repr'][:80]}")
    for alias, mod in sorted(manifest["modules"].items()):
        print(f"  {alias}: module {mod}")
    for name, why in sorted(manifest["skipped"].items()):
        print(f"  {name}: not checkpointed ({why['reason']})")


def _cmd_diff(store: Store, args: argparse.Namespace) -> None:
    a, b = (store.manifest(Timeline(store).find(r, args.session).id) for r in (args.a, args.b))
    print(diff_manifests(a, b))


def _cmd_gc(store: Store, args: argparse.Namespace) -> None:
    if not args.grace >= 0:  # -5 or nan would let gc take the blobs a writer is still uploading
        raise BadArgument(f"--grace must be a number of seconds, 0 or more, not {args.grace:g}")
    max_size = parse_size(args.max_size) if args.max_size is not None else None  # '' is no size
    timeline = Timeline(store)
    if args.session:
        store.checkpoints(args.session)  # UnknownSession, as ``list`` says it
    sessions = [args.session] if args.session else [s["key"] for s in timeline.sessions()]
    thinned = timeline.gc(sessions, args.keep_last, max_size)
    print(f"thinned {len(sessions)} session(s): {', '.join(sessions) or 'none'}")
    print(format_thinned(thinned, store.size(), max_size, args.keep_last))
    if args.replica is not None:
        args.replica.push()  # the deleted checkpoints' records go, and anything not uploaded yet is
        objects, size = args.replica.gc(args.grace)
        print(f"{args.replica.url}: removed {objects} unreferenced object(s), freed {human_bytes(size)}")


def _cmd_verify(store: Store, args: argparse.Namespace) -> int:
    if args.repair:
        for done in store.repair():
            print(done)
    remote_only = RemoteCatalog(store).remote_only()
    problems = args.refused + store.verify(remote_only)
    if args.replica is not None:
        problems += args.replica.verify_remote(remote_only)
    for problem in problems:
        print(problem)
    sessions = store.sessions()
    count = sum(s["checkpoints"] for s in sessions)
    remote = len(remote_only)
    only = f" ({remote} only in the remote store, their blobs checked there)"
    print(
        f"{store.root}: {count} checkpoint(s) in {len(sessions)} session(s){only if remote else ''}, "
        f"{len(problems)} problem(s)"
    )
    return 3 if problems else 0


def _cmd_export(store: Store, args: argparse.Namespace) -> None:
    import dill

    if not args.file:  # it is the working directory to pathlib: "cannot write : Is a directory"
        raise BadArgument("export needs a FILE to write the checkpoint to, not ''")
    if Path(store.root).resolve() in Path(args.file).resolve().parents:
        raise BadArgument(f"{args.file} is inside the checkpoint store {store.root}: write the export elsewhere")
    record = Timeline(store).find(args.ref, args.session)
    manifest = store.manifest(record.id)
    module = types.ModuleType("__main__")
    fetched = args.replica.fetched(record.id) if args.replica is not None else contextlib.nullcontext()
    with naming(str(record.id)), fetched:
        report = restore_namespace(store.blobs, module, record.id, manifest)

    def dump(f: BinaryIO) -> None:
        with as_main(module):
            dill.dump_module(f, module="__main__", refimported=True)

    _write_whole(Path(args.file), dump, 0o600, args.file)  # the whole namespace: private to its owner, as the store
    missing = f"; not included: {', '.join(sorted(report.not_restored))}" if report.not_restored else ""
    print(f"checkpoint {record.id} written to {args.file} (load it with dill.load_module){missing}")


def _write_whole(path: Path, write: Callable[[BinaryIO], object], mode: int, what: str) -> None:
    """Write ``path`` whole or not at all: into a new file beside it (``mode``), renamed onto it once complete. A full
    disk left a traceback and a truncated file, and an existing file was emptied first. A path that is no regular
    file (``/dev/stdout``, a pipe) is written in place. ``what`` names the file in the error."""
    in_place = path.exists() and not path.is_file()
    written = path if in_place else path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        flags = os.O_WRONLY if in_place else os.O_WRONLY | os.O_CREAT | os.O_EXCL
        f = os.fdopen(os.open(written, flags, mode), "wb")
    except OSError as e:
        raise BadArgument(f"cannot write {what}: {e.strerror}") from None
    try:
        with f:
            write(f)
        if not in_place:
            os.replace(written, path)
    except BaseException as e:
        if not in_place:
            with contextlib.suppress(OSError):
                os.unlink(written)
        if isinstance(e, OSError):
            unchanged = "" if in_place else "; nothing was changed"
            raise BadArgument(f"cannot write {what}: {e.strerror}{unchanged}") from None
        raise


def _profile_config() -> Path:
    from IPython.paths import get_ipython_dir

    return Path(get_ipython_dir()) / "profile_default" / "ipython_config.json"


def _set_enabled(enabled: bool) -> None:
    path = _profile_config()
    try:
        config: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    except (ValueError, OSError) as e:
        raise BadArgument(f"cannot read the IPython profile's {path}: {e}; nothing was changed") from None
    app = config.setdefault("InteractiveShellApp", {})
    extensions = [e for e in app.get("extensions", []) if e != EXTENSION]
    if enabled:
        extensions.append(EXTENSION)
    app["extensions"] = extensions
    text = (json.dumps(config, indent=2) + "\n").encode()
    with contextlib.suppress(OSError):  # else the write says why it cannot write there
        path.parent.mkdir(parents=True, exist_ok=True)
    _write_whole(path, lambda f: f.write(text), 0o666, f"the IPython profile's {path}")  # a full disk truncated it
    print(f"jupyter_ckpt {'enabled' if enabled else 'disabled'} in {path}")


# The commands that work on a store, by name (``enable`` and ``disable`` work on the IPython profile).
COMMANDS: dict[str, Callable[[Store, argparse.Namespace], int | None]] = {
    "list": _cmd_list,
    "show": _cmd_show,
    "diff": _cmd_diff,
    "gc": _cmd_gc,
    "verify": _cmd_verify,
    "export": _cmd_export,
}


def main(argv: Sequence[str] | None = None) -> int:
    with contextlib.redirect_stdout(_Escaped(sys.stdout)), contextlib.redirect_stderr(_Escaped(sys.stderr)):
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if getattr(args, "store_after", None) is not None:
        if getattr(args, "_given_store", False):
            parser.error("--store is given twice; give it once")
        args.store = args.store_after
    try:
        if args.command in ("enable", "disable"):
            _set_enabled(args.command == "enable")
            return 0
        remote = store_location(args.store)[1] is not None
        # A local store is only maintained, never made; a remote one is listed through a local index of it.
        store = open_store(args.store, create=remote)
        args.replica = open_replica(store, args.store) if remote else None
        args.refused = []
        if args.replica is not None:
            try:
                args.replica.pull()
            except IntegrityError as e:  # the other records are in: the command goes on, and verify counts it
                print(f"jupyter ckpt: {e}", file=sys.stderr)
                args.refused.append(str(e))
        if getattr(args, "session", None) is not None:  # ``--session ""`` named every session: gc thinned them all
            args.session = _session(store, args.session)
        with reading_store(store.root):
            return int(COMMANDS[args.command](store, args) or 0)
    except CheckpointError as e:
        print(f"jupyter ckpt: error: {e}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:  # read by ``head``, which has all it wanted: as a command killed by SIGPIPE ends
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit says nothing
        return 128 + 13


if __name__ == "__main__":
    sys.exit(main())

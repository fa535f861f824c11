"""mapping.py on its own: private memory across a fork, and buffers mapped from pieces of files."""

from __future__ import annotations

import mmap
import os
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from jupyter_ckpt import mapping

pytestmark = pytest.mark.skipif(not mapping.supported(), reason="mapping pieces of files needs Linux")

PAGE = mmap.PAGESIZE


def in_child(buffer: memoryview | mmap.mmap, child: Callable[[], bytes], before_child: Callable[[], None]) -> bytes:
    """Fork; the child waits until the parent has run ``before_child``, then runs ``child`` and sends back its bytes."""
    go_r, go_w = os.pipe()
    out_r, out_w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12 warns of fork in a threaded process
        pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            os.read(go_r, 1)
            os.write(out_w, child())
            code = 0
        finally:
            os._exit(code)
    os.close(go_r)
    os.close(out_w)
    before_child()
    os.write(go_w, b"g")
    os.close(go_w)
    received = b""
    while chunk := os.read(out_r, 65536):
        received += chunk
    os.close(out_r)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return received


def test_private_memory_is_zeroed_and_writable() -> None:
    memory = mapping.private_memory(3 * PAGE + 10)
    assert len(memory) == 3 * PAGE + 10 and memory[:] == bytes(3 * PAGE + 10)
    memory[-5:] = b"hello"
    assert memory[-5:] == b"hello"


def blob_like(path: Path, payload: bytes) -> Path:
    """A file with a page of header before its payload, as a raw blob is laid out."""
    path.write_bytes(b"H" * PAGE + payload)
    return path


@pytest.fixture(params=["anonymous", "mapped"])
def buffer(request: pytest.FixtureRequest, tmp_path: Path) -> memoryview:
    """Two pages holding b"before" first: private anonymous memory, or a mapped piece of a file."""
    if request.param == "anonymous":
        memory = memoryview(mapping.private_memory(2 * PAGE))
        memory[:6] = b"before"
        return memory
    path = blob_like(tmp_path / "piece", b"before" + bytes(2 * PAGE - 6))
    return mapping.map_pieces(2 * PAGE, [(0, path, PAGE, 2 * PAGE)])


def test_a_forked_childs_writes_are_not_seen_by_the_parent(buffer: memoryview) -> None:
    def child() -> bytes:
        buffer[:6] = b"CHILD!"
        buffer[PAGE : PAGE + 6] = b"CHILD!"
        return bytes(buffer[:6])

    assert in_child(buffer, child, lambda: None) == b"CHILD!"
    assert bytes(buffer[:6]) == b"before" and bytes(buffer[PAGE : PAGE + 6]) == bytes(6)


def test_the_parents_writes_after_a_fork_are_not_seen_by_the_child(buffer: memoryview) -> None:
    def parent() -> None:
        buffer[:6] = b"after!"

    assert in_child(buffer, lambda: bytes(buffer[:6]), parent) == b"before"
    assert bytes(buffer[:6]) == b"after!"


@pytest.fixture
def pieces(tmp_path: Path) -> tuple[list[mapping.Piece], bytes]:
    """Three pieces of two files, the last not a whole page, and the bytes the buffer should hold."""
    first = os.urandom(2 * PAGE)
    second = os.urandom(PAGE + 123)
    a = blob_like(tmp_path / "a", first)
    b = blob_like(tmp_path / "b", second)
    layout: list[mapping.Piece] = [(0, a, PAGE, PAGE), (PAGE, a, 2 * PAGE, PAGE), (3 * PAGE, b, PAGE, len(second))]
    expected = first + bytes(PAGE) + second  # the page no piece covers stays zero
    return layout, expected


def test_map_pieces_holds_the_pieces_bytes_in_place(pieces: tuple[list[mapping.Piece], bytes]) -> None:
    layout, expected = pieces
    size = len(expected) + 2 * PAGE  # and so does everything after the last piece
    view = mapping.map_pieces(size, layout)
    assert view.nbytes == size
    assert bytes(view) == expected + bytes(2 * PAGE)


def test_writing_to_a_mapped_buffer_never_changes_its_files(pieces: tuple[list[mapping.Piece], bytes]) -> None:
    layout, expected = pieces
    files = {path: path.read_bytes() for _, path, _, _ in layout}
    view = mapping.map_pieces(len(expected), layout)
    view[:] = b"\xff" * len(expected)
    assert bytes(view) == b"\xff" * len(expected)
    assert {path: path.read_bytes() for path in files} == files


def test_a_file_removed_after_mapping_stays_readable_through_the_buffer(
    pieces: tuple[list[mapping.Piece], bytes],
) -> None:
    layout, expected = pieces
    view = mapping.map_pieces(len(expected), layout)
    for _, path, _, _ in layout:
        path.unlink(missing_ok=True)
    assert bytes(view) == expected


def mapped_files() -> set[str]:
    """The files this process has mapped, from /proc/self/maps."""
    fields = (line.split(maxsplit=5) for line in Path("/proc/self/maps").read_text().splitlines())
    return {f[5].strip() for f in fields if len(f) == 6}


def test_the_files_are_unmapped_when_the_last_view_goes(pieces: tuple[list[mapping.Piece], bytes]) -> None:
    layout, expected = pieces
    view = mapping.map_pieces(len(expected), layout)
    names = {str(path) for _, path, _, _ in layout}
    assert names <= mapped_files()
    array_like = view[PAGE:]
    del view
    assert names <= mapped_files()  # a slice still holds the region
    del array_like
    assert not names & mapped_files()


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(lambda p: (1, p, PAGE, PAGE), id="start-not-on-a-page"),
        pytest.param(lambda p: (0, p, 100, PAGE), id="offset-not-on-a-page"),
        pytest.param(lambda p: (2 * PAGE, p, PAGE, 2 * PAGE), id="past-the-end"),
        pytest.param(lambda p: (2 * PAGE, p.with_name("missing"), PAGE, PAGE), id="missing-file"),
    ],
)
def test_a_piece_that_cannot_be_mapped_raises_and_leaves_nothing_mapped(
    tmp_path: Path, bad: Callable[[Path], mapping.Piece]
) -> None:
    good = blob_like(tmp_path / "good", os.urandom(2 * PAGE))
    with pytest.raises(OSError):
        mapping.map_pieces(3 * PAGE, [(0, good, PAGE, 2 * PAGE), bad(good)])
    assert str(good) not in mapped_files()

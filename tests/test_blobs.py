"""blobs.py on its own: the blob file format and ``LocalBlobs``, in a directory of the test's own."""

from __future__ import annotations

import mmap
import os
import resource
import struct
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from objectstore import notebook

from jupyter_ckpt.blobs import _BATCH_OPEN, BLOB_VERSION, CODEC_SHUFFLED, CODEC_ZSTD, MAGIC, LocalBlobs, content_key
from jupyter_ckpt.errors import IntegrityError, StoreVersionError
from jupyter_ckpt.manifest import FORMAT_VERSION
from jupyter_ckpt.restore import read_group
from jupyter_ckpt.store import Store

SECRET = b"a secret of the test, long enough to sign with"
TEXT = b"the same words again " * 5_000  # compresses well
NOISE = np.random.default_rng(0).random(3 * mmap.PAGESIZE // 8 + 5).tobytes()  # random doubles do not
DEAD_PID = 4_194_305  # above the largest pid_max Linux allows: no process has it


@pytest.fixture
def blobs(tmp_path: Path) -> LocalBlobs:
    return LocalBlobs(tmp_path / "blobs", SECRET, create=True)


def edited(blobs: LocalBlobs, key: str, edit: Callable[[bytearray], None]) -> bytes:
    """Change a blob file in place as an outside hand would; returns its new bytes."""
    data = bytearray(blobs.path(key).read_bytes())
    edit(data)
    blobs.path(key).write_bytes(bytes(data))
    return bytes(data)


def test_a_blob_that_compresses_has_a_small_header_and_cannot_be_mapped(blobs: LocalBlobs) -> None:
    info = blobs.put(TEXT)
    assert info.key == content_key(TEXT) and info.size == len(TEXT) and info.new
    data = blobs.path(info.key).read_bytes()
    assert data.startswith(MAGIC) and len(data) == info.stored < len(TEXT) / 10
    assert blobs.sizes(data)[1] == len(data) and blobs.sizes(data)[0] == len(data) - 64
    assert blobs.raw_extent(info.key) is None
    assert bytes(blobs.read(info.key)) == TEXT


def test_a_raw_blob_is_page_aligned_so_its_payload_can_be_mapped_from_the_file(blobs: LocalBlobs) -> None:
    info = blobs.put(NOISE)
    assert info.stored == mmap.PAGESIZE + len(NOISE)
    extent = blobs.raw_extent(info.key)
    assert extent is not None
    path, offset, length = extent
    assert (path, offset, length) == (blobs.path(info.key), mmap.PAGESIZE, len(NOISE))
    assert path.read_bytes()[offset : offset + length] == NOISE


def test_compress_false_keeps_even_compressible_data_raw(blobs: LocalBlobs) -> None:
    info = blobs.put(TEXT, compress=False)
    assert info.stored == mmap.PAGESIZE + len(TEXT)
    assert blobs.raw_extent(info.key) is not None
    assert bytes(blobs.read(info.key)) == TEXT


def test_a_raw_blob_smaller_than_a_page_keeps_the_small_header(blobs: LocalBlobs) -> None:
    info = blobs.put(b"tiny", compress=False)
    assert info.stored == 64 + 4
    assert blobs.raw_extent(info.key) is None  # nothing to map: it is read
    assert bytes(blobs.read(info.key)) == b"tiny"


LABELS = np.random.default_rng(1).integers(0, 1000, 100_000)  # small integers: six zero bytes of eight
READINGS = np.round(np.random.default_rng(2).normal(20, 5, 100_000), 1)  # a sensor's doubles, one decimal


def header(blobs: LocalBlobs, key: str) -> tuple[int, int]:
    """The version and codec a blob file says."""
    data = blobs.path(key).read_bytes()
    return data[8], data[9]


@pytest.mark.parametrize("array", [LABELS, READINGS, LABELS.astype(np.int32), LABELS.astype(np.int16)])
def test_an_array_is_stored_smaller_with_its_bytes_shuffled_by_item_and_read_back_exactly(
    blobs: LocalBlobs, array: np.ndarray
) -> None:
    shuffled = blobs.put(array.data, True, array.itemsize)
    plain = LocalBlobs(blobs.root.parent / "plain", SECRET, create=True).put(array.data)
    assert shuffled.key == plain.key == content_key(array.tobytes())  # the key is the content's, however stored
    assert shuffled.stored < plain.stored < array.nbytes
    assert header(blobs, shuffled.key) == (BLOB_VERSION, CODEC_SHUFFLED[array.itemsize])
    assert bytes(blobs.read(shuffled.key)) == array.tobytes()
    into = np.empty_like(array)
    blobs.read(shuffled.key, into=memoryview(into).cast("B"))
    assert np.array_equal(into, array)


def test_only_shuffled_blobs_say_the_version_that_older_jupyter_ckpt_refuses(blobs: LocalBlobs) -> None:
    # An older version reads every blob whose header says FORMAT_VERSION, and refuses a higher one cleanly.
    assert header(blobs, blobs.put(TEXT).key) == (FORMAT_VERSION, CODEC_ZSTD)
    assert header(blobs, blobs.put(NOISE).key)[0] == FORMAT_VERSION
    assert header(blobs, blobs.put(LABELS.data, True, 8).key)[0] == BLOB_VERSION > FORMAT_VERSION


def test_random_doubles_stay_raw_and_mappable_though_shuffling_would_save_a_little(blobs: LocalBlobs) -> None:
    doubles = np.random.default_rng(3).random(100_000)
    info = blobs.put(doubles.data, True, 8)
    assert info.stored == mmap.PAGESIZE + doubles.nbytes and blobs.raw_extent(info.key) is not None


def test_items_of_another_size_are_compressed_as_they_are(blobs: LocalBlobs) -> None:
    records = np.zeros(50_000, dtype=[("a", "i4"), ("b", "f8")])  # 12 bytes an item
    info = blobs.put(records.data, True, records.itemsize)
    assert header(blobs, info.key) == (FORMAT_VERSION, CODEC_ZSTD)
    assert bytes(blobs.read(info.key)) == records.tobytes()


def test_a_shuffled_blob_told_another_item_size_fails_its_signature_check(blobs: LocalBlobs) -> None:
    info = blobs.put(LABELS.data, True, 8)

    def other_item_size(data: bytearray) -> None:
        data[9] = CODEC_SHUFFLED[4]

    edited(blobs, info.key, other_item_size)
    with pytest.raises(IntegrityError, match="fails its signature check"):
        blobs.read(info.key)


def test_an_empty_blob_round_trips(blobs: LocalBlobs) -> None:
    info = blobs.put(b"")
    assert bytes(blobs.read(info.key)) == b""


def test_any_buffer_is_stored_as_its_bytes(blobs: LocalBlobs) -> None:
    array = np.arange(1000, dtype=np.int64).reshape(10, 100)
    info = blobs.put(array.data)
    assert info.key == content_key(array.tobytes()) and info.size == array.nbytes
    assert bytes(blobs.read(info.key)) == array.tobytes()


@pytest.mark.parametrize("content", [TEXT, NOISE], ids=["compressed", "raw"])
def test_read_into_a_buffer_fills_that_buffer(blobs: LocalBlobs, content: bytes) -> None:
    info = blobs.put(content)
    into = memoryview(bytearray(len(content)))
    assert blobs.read(info.key, into=into) is into
    assert bytes(into) == content


@pytest.mark.parametrize("content", [TEXT, NOISE], ids=["compressed", "raw"])
def test_read_into_a_buffer_of_another_size_is_refused(blobs: LocalBlobs, content: bytes) -> None:
    info = blobs.put(content)
    payload = info.stored - (4096 if content is NOISE else 64)  # after the header
    said = f"holds {len(content)} bytes where 10" if content is NOISE else f"is {payload} bytes compressed, more than"
    with pytest.raises(IntegrityError, match=f"blob {info.key} {said}"):
        blobs.read(info.key, into=memoryview(bytearray(10)))


def test_equal_content_is_one_file(blobs: LocalBlobs) -> None:
    first = blobs.put(NOISE)
    again = blobs.put(memoryview(bytearray(NOISE)))
    assert again.key == first.key and not again.new and again.stored == first.stored
    assert list(blobs.listing()) == [first.key]


def test_listing_gives_every_blob_its_size_and_time_and_leaves_temp_files_out(blobs: LocalBlobs) -> None:
    text, noise = blobs.put(TEXT), blobs.put(NOISE)
    (blobs.tmp / f"{'0' * 32}.{os.getpid()}.1").write_bytes(b"being written")
    os.utime(blobs.path(text.key), (1_000_000.0, 1_000_000.0))
    listing = blobs.listing()
    assert set(listing) == {text.key, noise.key}
    assert listing[text.key].size == text.stored and listing[noise.key].size == noise.stored
    assert listing[text.key].modified == 1_000_000.0


def test_listing_leaves_out_a_file_gone_since_its_directory_was_read_and_files_that_are_no_blobs(
    blobs: LocalBlobs,
) -> None:
    """A blob another gc collected between the reading of its directory and the look at its file (a link to
    nothing stands for it here, every time) failed the listing with FileNotFoundError; a file named as no blob
    key is (a ``.DS_Store``) was listed as a blob, and gc refused it as a "malformed blob key"."""
    kept = blobs.put(TEXT)
    gone = blobs.path("d" * 32)
    gone.parent.mkdir(exist_ok=True)
    gone.symlink_to(gone.with_name("collected"))
    blobs.path(kept.key).with_name(".DS_Store").write_bytes(b"Finder")
    assert list(blobs.listing()) == [kept.key]


def test_has_and_delete(blobs: LocalBlobs) -> None:
    info = blobs.put(TEXT)
    assert blobs.has(info.key)
    blobs.delete(info.key)
    assert not blobs.has(info.key) and blobs.listing() == {}
    blobs.delete(info.key)  # gone already: nothing to do
    with pytest.raises(IntegrityError, match=f"blob {info.key} is missing"):
        blobs.read(info.key)
    with pytest.raises(IntegrityError, match=f"blob {info.key} is missing"):
        blobs.raw_extent(info.key)


def test_clean_tmp_removes_only_the_files_of_writers_that_are_gone(blobs: LocalBlobs) -> None:
    live = blobs.tmp / f"{'1' * 32}.{os.getpid()}.7"
    dead = blobs.tmp / f"{'2' * 32}.{DEAD_PID}.7"
    stray = blobs.tmp / "not-a-writers-name"
    live.write_bytes(b"x" * 10)
    dead.write_bytes(b"y" * 300)
    stray.write_bytes(b"z" * 5)
    assert blobs.clean_tmp() == (2, 305)
    assert sorted(blobs.tmp.iterdir()) == [live]
    assert blobs.clean_tmp() == (0, 0)


def test_a_write_leaves_no_temp_file(blobs: LocalBlobs) -> None:
    blobs.put(TEXT)
    blobs.put(NOISE)
    assert list(blobs.tmp.iterdir()) == []


def test_a_batch_makes_its_blobs_visible_only_when_it_ends(blobs: LocalBlobs) -> None:
    with blobs.batch() as batch:
        text, noise = batch.put(TEXT), batch.put(NOISE)
        assert not blobs.has(text.key) and not blobs.has(noise.key) and blobs.listing() == {}
    assert bytes(blobs.read(text.key)) == TEXT and bytes(blobs.read(noise.key)) == NOISE
    assert list(blobs.tmp.iterdir()) == []


def test_a_batch_that_fails_leaves_no_blob_and_no_temp_file(blobs: LocalBlobs) -> None:
    with pytest.raises(RuntimeError, match="the save failed"), blobs.batch() as batch:
        keys = [batch.put(TEXT).key, batch.put(NOISE).key]
        raise RuntimeError("the save failed")
    assert not any(blobs.has(k) for k in keys)
    assert list(blobs.tmp.iterdir()) == []


def test_the_same_content_twice_in_a_batch_is_one_new_blob(blobs: LocalBlobs) -> None:
    with blobs.batch() as batch:
        first, again = batch.put(NOISE), batch.put(bytearray(NOISE))
    assert again == first and first.new
    assert list(blobs.listing()) == [first.key]


def test_a_batch_of_many_blobs_from_many_threads_keeps_few_files_open_and_writes_them_all(
    blobs: LocalBlobs,
) -> None:
    contents = [f"blob {i} ".encode() * 100 for i in range(3 * _BATCH_OPEN + 5)]
    open_before = len(os.listdir("/proc/self/fd"))
    with blobs.batch() as batch, ThreadPoolExecutor(4) as pool:
        infos = list(pool.map(batch.put, contents))
        assert len(os.listdir("/proc/self/fd")) - open_before <= _BATCH_OPEN
    assert [bytes(blobs.read(info.key)) for info in infos] == contents
    assert list(blobs.tmp.iterdir()) == []


def test_a_batch_in_a_process_short_of_file_descriptors_writes_every_blob(blobs: LocalBlobs) -> None:
    contents = [f"blob {i} ".encode() * 100 for i in range(_BATCH_OPEN)]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 8, hard))
    try:
        with blobs.batch() as batch:
            infos = [batch.put(content) for content in contents]
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert [bytes(blobs.read(info.key)) for info in infos] == contents
    assert list(blobs.tmp.iterdir()) == []


def test_a_blob_file_under_another_key_fails_its_signature(blobs: LocalBlobs) -> None:
    text, noise = blobs.put(TEXT), blobs.put(NOISE)
    blobs.path(noise.key).write_bytes(blobs.path(text.key).read_bytes())
    with pytest.raises(IntegrityError, match=f"blob {noise.key} fails its signature check"):
        blobs.read(noise.key)


def test_a_blob_signed_with_another_secret_is_refused(blobs: LocalBlobs) -> None:
    info = blobs.put(TEXT)
    other = LocalBlobs(blobs.root, b"another secret, just as long as the first one", create=False)
    with pytest.raises(IntegrityError, match="fails its signature check"):
        other.read(info.key)


def _set_version(data: bytearray) -> None:
    data[8] = BLOB_VERSION + 1


def _flip_codec(data: bytearray) -> None:
    data[9] ^= 1


def _bad_magic(data: bytearray) -> None:
    data[:8] = b"NOTABLOB"


def _longer_payload_field(data: bytearray) -> None:
    length = struct.unpack_from("<Q", data, 16)[0]
    struct.pack_into("<Q", data, 16, length + 1)


def _odd_header_size(data: bytearray) -> None:
    # a header of 128 bytes, all zeros past the fields: consistent with the file size, but not a size we write
    struct.pack_into("<I", data, 12, 128)
    data[64:64] = b"\0" * 64


def _appended(data: bytearray) -> None:
    data += b"more"


def _cut(data: bytearray) -> None:
    del data[-1]


def _cut_inside_header(data: bytearray) -> None:
    del data[20:]


def _unknown_codec(data: bytearray) -> None:
    data[9] = 200


DAMAGE = [
    (_flip_codec, IntegrityError, "fails its signature check"),  # the codec is signed
    (_bad_magic, IntegrityError, "is not a jupyter-ckpt blob"),
    (_longer_payload_field, IntegrityError, "is truncated"),
    (_odd_header_size, IntegrityError, "has a damaged header"),
    (_appended, IntegrityError, "is truncated"),
    (_cut, IntegrityError, "is truncated"),
    (_cut_inside_header, IntegrityError, "is truncated"),
    (_set_version, StoreVersionError, "was written by a newer jupyter-ckpt"),
    (_unknown_codec, IntegrityError, "has a damaged header"),
]


@pytest.mark.parametrize(("damage", "error", "message"), DAMAGE, ids=[d[0].__name__.strip("_") for d in DAMAGE])
def test_a_damaged_blob_is_refused_with_its_error(
    blobs: LocalBlobs, damage: Callable[[bytearray], None], error: type[Exception], message: str
) -> None:
    info = blobs.put(TEXT)
    edited(blobs, info.key, damage)
    with pytest.raises(error, match=f"blob {info.key} {message}"):
        blobs.read(info.key)


@pytest.mark.parametrize(
    ("damage", "error"), [(_set_version, StoreVersionError), (_cut, IntegrityError), (_bad_magic, IntegrityError)]
)
def test_raw_extent_checks_the_header_before_it_points_into_a_file(
    blobs: LocalBlobs, damage: Callable[[bytearray], None], error: type[Exception]
) -> None:
    info = blobs.put(NOISE)
    edited(blobs, info.key, damage)
    with pytest.raises(error):
        blobs.raw_extent(info.key)


def test_raw_extent_does_not_check_the_signature_but_read_does(blobs: LocalBlobs) -> None:
    info = blobs.put(NOISE)

    def flip_last(data: bytearray) -> None:
        data[-1] ^= 0xFF

    edited(blobs, info.key, flip_last)
    assert blobs.raw_extent(info.key) is not None  # whoever maps it verifies it with read afterwards
    with pytest.raises(IntegrityError, match="fails its signature check"):
        blobs.read(info.key)


@pytest.mark.parametrize("content", [TEXT, NOISE], ids=["compressed", "raw"])
@pytest.mark.parametrize("as_path", [False, True], ids=["bytes", "file"])
def test_a_fetched_blob_file_is_placed_byte_for_byte(
    blobs: LocalBlobs, tmp_path: Path, content: bytes, as_path: bool
) -> None:
    info = blobs.put(content)
    fetched = blobs.read_file(info.key)
    assert fetched == blobs.path(info.key).read_bytes()
    here = LocalBlobs(tmp_path / "elsewhere", SECRET, create=True)
    source: bytes | Path = fetched
    if as_path:
        source = tmp_path / "download"
        source.write_bytes(fetched)
    here.write_file(info.key, source)
    assert here.path(info.key).read_bytes() == fetched
    assert bytes(here.read(info.key)) == content
    assert list(here.tmp.iterdir()) == []


def _tampered(data: bytearray) -> None:
    data[-1] ^= 0xFF


@pytest.mark.parametrize(
    ("damage", "error", "message"),
    [
        (_tampered, IntegrityError, "fails its signature check"),
        (_cut, IntegrityError, "is truncated"),
        (_bad_magic, IntegrityError, "is not a jupyter-ckpt blob"),
        (_set_version, StoreVersionError, "newer jupyter-ckpt"),
    ],
    ids=["tampered", "truncated", "not-a-blob", "newer-version"],
)
def test_a_fetched_blob_is_verified_before_it_becomes_visible(
    blobs: LocalBlobs, tmp_path: Path, damage: Callable[[bytearray], None], error: type[Exception], message: str
) -> None:
    info = blobs.put(TEXT)
    fetched = bytearray(blobs.read_file(info.key))
    damage(fetched)
    here = LocalBlobs(tmp_path / "elsewhere", SECRET, create=True)
    with pytest.raises(error, match=message):
        here.write_file(info.key, bytes(fetched))
    assert not here.has(info.key)
    assert here.listing() == {} and list(here.tmp.iterdir()) == []


def test_a_fetched_blob_under_the_wrong_key_is_refused(blobs: LocalBlobs, tmp_path: Path) -> None:
    text, noise = blobs.put(TEXT), blobs.put(NOISE)
    here = LocalBlobs(tmp_path / "elsewhere", SECRET, create=True)
    with pytest.raises(IntegrityError, match=f"blob {noise.key} fails its signature check"):
        here.write_file(noise.key, blobs.read_file(text.key))
    assert here.listing() == {}


def test_a_fetched_blob_signed_with_another_secret_is_refused(blobs: LocalBlobs, tmp_path: Path) -> None:
    info = blobs.put(TEXT)
    here = LocalBlobs(tmp_path / "elsewhere", b"another secret, just as long as the first one", create=True)
    with pytest.raises(IntegrityError, match="fails its signature check"):
        here.write_file(info.key, blobs.read_file(info.key))
    assert not here.has(info.key)


@pytest.mark.parametrize("key", ["../../secret", "ABCDEF" * 6, "0" * 31, "0" * 33])
def test_a_malformed_key_never_reaches_the_filesystem(blobs: LocalBlobs, key: str) -> None:
    for call in (blobs.read, blobs.raw_extent, blobs.delete, blobs.has):
        with pytest.raises(IntegrityError, match="malformed blob key"):
            call(key)
    with pytest.raises(IntegrityError):
        blobs.write_file(key, blobs.read_file(blobs.put(TEXT).key))


def test_a_link_planted_under_a_temp_file_name_is_replaced_not_written_through(
    blobs: LocalBlobs, tmp_path: Path
) -> None:
    """A blob is written to ``tmp/<key>.<pid>.<thread>`` first: a link there wrote the blob over the file it
    pointed to (O_TRUNC follows links)."""
    victim = tmp_path / "notes.txt"
    victim.write_text("mine")
    data = b"a variable's bytes" * 100
    (blobs.tmp / f"{content_key(data)}.{os.getpid()}.{threading.get_ident()}").symlink_to(victim)
    info = blobs.put(data)
    assert victim.read_bytes() == b"mine"
    assert bytes(blobs.read(info.key)) == data and not blobs.path(info.key).is_symlink()


def test_a_blob_file_grown_to_a_terabyte_is_refused_before_its_bytes_are_read(blobs: LocalBlobs) -> None:
    """A blob file is read whole before its signature is checked. One made sparse and a terabyte long (it takes no
    room on the disk), its header saying so, was read into a buffer of that size: a MemoryError, or the memory
    filled; a compressed chunk can never be longer than the buffer it fills."""
    key = blobs.put(TEXT).key
    path = blobs.path(key)
    with open(path, "r+b") as f:
        f.seek(16)  # the header's payload size
        f.write(struct.pack("<Q", 1 << 40))
        f.truncate(64 + (1 << 40))
    with pytest.raises(IntegrityError, match=f"blob {key} is {1 << 40} bytes compressed, more than the {len(TEXT)} it"):
        blobs.read(key, into=memoryview(bytearray(len(TEXT))))
    with pytest.raises(IntegrityError, match=f"blob {key} is {1 << 40} bytes long, more than this process can hold"):
        blobs.read(key)


def test_a_file_planted_under_the_key_of_a_value_anyone_can_guess_is_written_over_not_reused(
    blobs: LocalBlobs,
) -> None:
    """A blob is named by its content, and a value such as ``x = 1`` has a key anyone can compute. A file planted
    under it before the value was first checkpointed was taken as that blob, written already: every checkpoint
    holding the value then failed its signature check, and the restore refused them all. A file that is no sound
    blob (small ones are checked whole) is written over."""
    data = b"\x80\x05K\x01."  # what pickle makes of 1
    blobs.path(content_key(data)).parent.mkdir(parents=True, exist_ok=True)
    blobs.path(content_key(data)).write_bytes(b"planted")
    info = blobs.put(data)
    assert info.new and bytes(blobs.read(info.key)) == data
    forged = bytearray(blobs.path(info.key).read_bytes())
    forged[-1] ^= 1  # a header that matches, a payload that does not
    blobs.path(info.key).write_bytes(bytes(forged))
    later = LocalBlobs(blobs.root, SECRET, create=False)  # the next kernel: this one knows it wrote a sound one
    assert later.put(data).new and bytes(later.read(info.key)) == data
    assert not later.put(data).new  # a sound one is used again, as ever


def test_a_groups_stream_grown_to_a_length_that_fits_the_memory_is_refused_before_it_is_read(store: Store) -> None:
    """A group's pickle stream had no length in the signed manifest: its blob file grown (sparse, no room on the disk)
    to a length the memory could hold, its header saying so, was read whole (256 MiB here) before it failed its
    signature check. Its capture records the length, and a longer blob is refused unread."""
    nb = notebook(store)
    group = store.manifest(nb.save())["groups"][0]
    path = store.blobs.path(group["key"])
    grown = 256 << 20
    with open(path, "r+b") as f:
        (header_size,) = struct.unpack_from("<I", f.read(16), 12)
        f.seek(16)  # the header's payload size
        f.write(struct.pack("<Q", grown))
        f.truncate(header_size + grown)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(IntegrityError, match=f"blob {group['key']} is {grown} bytes compressed, more than the "):
        read_group(store.blobs, group)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 << 10  # KiB: nothing of it was read


def test_an_undos_chunk_grown_on_disk_is_refused_before_it_is_read(store: Store) -> None:
    """An undo copies into a live array only the chunks that differ from the checkpoint's, read (and verified) one by
    one with no expected length: one grown sparse on disk, its header saying so, was read whole (256 MiB here)
    before it failed its check. A chunk's length is known from its buffer's: a longer file is refused unread."""
    nb = notebook(store)
    nb.module.a = np.arange(2_000_000, dtype=np.float64)  # four chunks
    before = nb.save()
    nb.module.a[0] = -1.0  # in place: the undo patches the live array
    nb.save()
    (buffer,) = next(g for g in store.manifest(before)["groups"] if g["names"] == ["a"])["buffers"]
    path = store.blobs.path(buffer["chunks"][0])
    grown = 256 << 20
    with open(path, "r+b") as f:
        (header_size,) = struct.unpack_from("<I", f.read(16), 12)
        f.seek(16)
        f.write(struct.pack("<Q", grown))
        f.truncate(header_size + grown)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(IntegrityError, match=f"blob {buffer['chunks'][0]} is {grown} bytes compressed, more than"):
        nb.restore(str(before))
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 64 << 10  # KiB: nothing of it was read

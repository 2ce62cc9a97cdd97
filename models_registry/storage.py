"""Content-addressed, immutable file storage for model versions.

Layout under the storage root: `blobs/sha256/<ab>/<full hex>` for content, `staging/<id>/` for
uploads being checked. A blob is written once (temp file, fsync, rename) and never changed.
"""

import contextlib
import hashlib
import os
import queue
import shutil
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

CHUNK = 1024 * 1024
# Chunks read ahead of the thread that hashes and writes them: an upload holds at most
# IN_FLIGHT * CHUNK bytes in memory, whatever the size of its files.
IN_FLIGHT = 3
# A big staged file is handed to the disk every this many bytes, in the background, so the
# fsync before it is published only waits for the tail.
WRITEBACK_EVERY = 32 * CHUNK


def storage_root() -> Path:
    return Path(settings.SWITCHYARD_STORAGE_ROOT)


def blob_path(sha256: str) -> Path:
    return storage_root() / "blobs" / "sha256" / sha256[:2] / sha256


@dataclass(frozen=True)
class StagedFile:
    path: str  # relative path inside the upload's version folder (or "config.pbtxt")
    role: str  # "config" | "file"
    size: int
    sha256: str
    staged_at: Path


class Staging:
    """A private folder for one upload; `discard()` leaves nothing behind."""

    def __init__(self) -> None:
        self.root = storage_root() / "staging" / uuid.uuid4().hex
        self.root.mkdir(parents=True)
        self._count = 0
        self._buffers: list[bytearray] = []  # allocated once, reused by every file

    def write(self, source: BinaryIO, *, path: str, role: str, max_bytes: int) -> StagedFile:
        """Stream `source` to a staged file while hashing it; refuse past max_bytes.

        One pass: this thread reads (decompresses) while another hashes and writes, both
        releasing the GIL on 1 MiB chunks.
        """
        self._count += 1
        target = self.root / f"{self._count:06d}"
        if not self._buffers:
            self._buffers = [bytearray(CHUNK) for _ in range(IN_FLIGHT)]
        with open(target, "wb") as out:
            sink = _Sink(out)
            try:
                _pump(source, sink, self._buffers, max_bytes=max_bytes, path=path)
            finally:
                sink.close()
        return StagedFile(
            path=path, role=role, size=sink.size, sha256=sink.hexdigest(), staged_at=target
        )

    def commit(self, files: list[StagedFile]) -> list[Path]:
        """Move staged files into the blob store; returns the blobs that are new."""
        created = []
        for staged in files:
            target = blob_path(staged.sha256)
            if target.exists():
                # Already stored: mark it as just used, so that a sweep running before this
                # version's row commits takes it for new rather than unreferenced.
                with contextlib.suppress(OSError):
                    os.utime(target)
                if target.exists():
                    continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(staged.staged_at, "rb") as handle:
                os.fsync(handle.fileno())
            os.chmod(staged.staged_at, 0o444)
            os.replace(staged.staged_at, target)
            created.append(target)
        return created

    def discard(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class _Sink:
    """Hashes and writes one staged file's chunks, starting its writeback in the background.

    `close()` waits for that writeback and raises its error: an error reported to one
    fdatasync is not reported again to a later fsync of the same file.
    """

    def __init__(self, out: BinaryIO) -> None:
        self.out, self.size, self._digest = out, 0, hashlib.sha256()
        self._unsynced = 0
        self._syncer: threading.Thread | None = None
        self._sync_error: OSError | None = None

    def add(self, chunk: memoryview) -> None:
        self._digest.update(chunk)
        self.out.write(chunk)
        self.size += len(chunk)
        self._unsynced += len(chunk)
        if self._unsynced >= WRITEBACK_EVERY and not (self._syncer and self._syncer.is_alive()):
            self.out.flush()
            self._unsynced = 0
            self._syncer = threading.Thread(target=self._writeback, daemon=True)
            self._syncer.start()

    def _writeback(self) -> None:
        try:
            os.fdatasync(self.out.fileno())
        except OSError as exc:
            self._sync_error = exc

    def close(self) -> None:
        if self._syncer:
            self._syncer.join()
        if self._sync_error:
            raise self._sync_error

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


def _pump(source: BinaryIO, sink: _Sink, buffers: list, *, max_bytes: int, path: str) -> None:
    """Read `source` into `buffers` and feed them to `sink`; OverflowError past max_bytes."""
    first, second = buffers[0], buffers[1]
    size = source.readinto(first)
    more = source.readinto(second) if size else 0
    if size + more > max_bytes:
        raise OverflowError(path)
    if not more:  # one chunk or less: not worth a thread
        sink.add(memoryview(first)[:size])
        return
    worker = _Worker(sink, spare=buffers[2:])
    try:
        worker.put(first, size)
        worker.put(second, more)
        size += more
        while (buffer := worker.take()) is not None:
            n = source.readinto(buffer)
            size += n
            if size > max_bytes:
                raise OverflowError(path)
            if not n:
                break
            worker.put(buffer, n)
    finally:
        worker.stop()
    if worker.error:
        raise worker.error


class _Worker:
    """Feeds chunks to a sink from its own thread; buffers go round between two queues."""

    def __init__(self, sink: _Sink, *, spare: list) -> None:
        self._sink = sink
        self._free: queue.SimpleQueue = queue.SimpleQueue()
        self._full: queue.SimpleQueue = queue.SimpleQueue()
        for buffer in spare:
            self._free.put(buffer)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self._full.get()) is not None:
            buffer, n = item
            if self.error is None:
                try:
                    self._sink.add(memoryview(buffer)[:n])
                except BaseException as exc:  # re-raised in the reading thread
                    self.error = exc
            self._free.put(buffer)

    def put(self, buffer: bytearray, n: int) -> None:
        self._full.put((buffer, n))

    def take(self) -> bytearray | None:
        """A buffer the sink is done with (waits for one), or None once the sink failed."""
        buffer = self._free.get()
        return None if self.error else buffer

    def stop(self) -> None:
        self._full.put(None)
        self._thread.join()


def stored_blobs() -> Iterator[tuple[str, Path]]:
    """(sha256, path) of every blob in the store."""
    root = storage_root() / "blobs" / "sha256"
    if not root.is_dir():
        return
    for folder in sorted(root.iterdir()):
        if folder.is_dir():
            for path in sorted(folder.iterdir()):
                yield path.name, path


def staging_folders() -> list[Path]:
    """Every upload's staging folder (finished uploads discard theirs)."""
    root = storage_root() / "staging"
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def blob_remove(paths: list[Path]) -> None:
    """Undo a commit whose database write failed (only blobs that commit created)."""
    for path in paths:
        path.unlink(missing_ok=True)


def blob_open(sha256: str) -> BinaryIO:
    return open(blob_path(sha256), "rb")


def blob_verify(sha256: str) -> bool:
    """Re-hash a stored blob; True when its content still matches its name."""
    digest = hashlib.sha256()
    with blob_open(sha256) as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest() == sha256


def blob_chunks(sha256: str) -> Iterator[bytes]:
    with blob_open(sha256) as handle:
        yield from iter(lambda: handle.read(CHUNK), b"")


def manifest_digest(manifest: list[dict]) -> str:
    """sha256 over the sorted manifest lines `role\\tpath\\tsize\\tsha256`."""
    lines = sorted(f"{e['role']}\t{e['path']}\t{e['size']}\t{e['sha256']}\n" for e in manifest)
    return hashlib.sha256("".join(lines).encode()).hexdigest()

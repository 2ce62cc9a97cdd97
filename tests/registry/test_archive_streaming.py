"""Big uploads go through the threaded read / hash-and-write pipeline: same bytes, same refusals."""

import hashlib
import io
import os

import pytest

from models_registry import storage
from models_registry.models import ModelVersion
from models_registry.storage import CHUNK, Staging, blob_path
from tests.registry.archives import example_entries, tar_gz, upload, zip_bytes

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("artifacts")]

GOOD = example_entries("risk_score", 1)
# Several chunks each, one not a whole number of chunks, one compressible.
BIG = [("1/weights.bin", os.urandom(3 * CHUNK + 12345)), ("1/zeros.bin", bytes(2 * CHUNK))]


def _nothing_stored(root) -> bool:
    blobs = [p for p in (root / "blobs").rglob("*") if p.is_file()] if root.exists() else []
    staging = list((root / "staging").iterdir()) if (root / "staging").exists() else []
    return not blobs and not staging


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_big_files_are_stored_byte_for_byte_under_their_sha256(ada, kind):
    entries = [*GOOD, *BIG]
    archive = tar_gz(entries) if kind == "tar.gz" else zip_bytes(entries)
    response = upload(ada, archive, filename=f"m.{kind}")
    assert response.status_code == 201, response.content
    manifest = {e["path"]: e for e in ModelVersion.objects.get().manifest}
    for name, data in BIG:
        entry = manifest[name.removeprefix("1/")]
        assert entry["size"] == len(data)
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
        assert blob_path(entry["sha256"]).read_bytes() == data


def test_a_big_file_past_the_unpacked_limit_is_refused_mid_stream(ada, artifacts, settings):
    settings.SWITCHYARD_MAX_UNPACKED_BYTES = CHUNK + CHUNK // 2
    settings.SWITCHYARD_MAX_COMPRESSION_RATIO = 10_000  # the zeros compress far below
    response = upload(ada, tar_gz([*GOOD, ("1/zeros.bin", bytes(4 * CHUNK))]))
    assert response.status_code == 400, response.content
    assert "unpacks to more than" in response.json()["errors"][0]["message"]
    assert _nothing_stored(artifacts)


def test_a_truncated_archive_is_refused_and_leaves_nothing(ada, artifacts):
    archive = tar_gz([*GOOD, *BIG])
    response = upload(ada, archive[: len(archive) * 2 // 3])
    assert response.status_code == 400, response.content
    assert "damaged" in response.json()["errors"][0]["message"]
    assert _nothing_stored(artifacts)


def test_a_write_error_in_the_hashing_thread_reaches_the_caller(monkeypatch):
    def fail(self, chunk):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(storage._Sink, "add", fail)
    staging = Staging()
    with pytest.raises(OSError, match="No space left"):
        staging.write(io.BytesIO(bytes(5 * CHUNK)), path="w.bin", role="file", max_bytes=10**9)
    staging.discard()


def test_an_error_of_the_background_writeback_is_not_lost(monkeypatch):
    def fail(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(storage, "WRITEBACK_EVERY", CHUNK)
    monkeypatch.setattr(storage.os, "fdatasync", fail)
    staging = Staging()
    with pytest.raises(OSError, match="Input/output error"):
        staging.write(io.BytesIO(bytes(4 * CHUNK)), path="w.bin", role="file", max_bytes=10**9)
    staging.discard()

"""Hostile archives are refused before they cost memory or disk: header sizes, entry counts,
unpacked size and compression ratio, for .tar.gz and .zip alike."""

import io
import os
import tarfile
import tracemalloc
import zipfile

import pytest

from models_registry.archive import ArchiveLimits, ArchiveRefused, extract_upload
from models_registry.models import ModelVersion
from tests.registry.archives import (
    example_entries,
    tar_gz,
    tar_gz_with_extension_headers,
    upload,
    zip_bytes,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("artifacts")]

GOOD = example_entries("risk_score", 1)
MIB = 1024 * 1024
LIMITS = ArchiveLimits(
    max_entries=1000, max_unpacked_bytes=10**9, max_ratio=100.0, max_header_bytes=64 * 1024
)


def _refusal(response) -> str:
    assert response.status_code == 400, response.content
    assert ModelVersion.objects.count() == 0
    return response.json()["errors"][0]["message"]


def _nothing_stored(root) -> bool:
    return not [p for p in root.rglob("*") if p.is_file()] if root.exists() else True


def test_a_huge_gnu_long_name_is_refused_before_tarfile_reads_it():
    archive = tar_gz_with_extension_headers([(tarfile.GNUTYPE_LONGNAME, 80 * MIB)], GOOD)
    assert len(archive) < 200 * 1024  # a small upload ...
    tracemalloc.start()
    try:
        with pytest.raises(ArchiveRefused) as refused:
            extract_upload(io.BytesIO(archive), limits=LIMITS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "extension header" in refused.value.message
    assert f"{80 * MIB} bytes" in refused.value.message
    assert peak < 8 * MIB  # ... that used to cost the whole 80 MiB name in memory


def test_a_huge_pax_record_is_refused(ada, artifacts):
    archive = tar_gz_with_extension_headers([(tarfile.XHDTYPE, 2 * MIB)], GOOD)
    assert "over the limit of 65536 bytes" in _refusal(upload(ada, archive))
    assert _nothing_stored(artifacts)


def test_a_chain_of_extension_headers_is_refused(ada):
    headers = [(tarfile.GNUTYPE_LONGNAME, 100)] * 20
    message = _refusal(upload(ada, tar_gz_with_extension_headers(headers, GOOD)))
    assert "extension headers are too many" in message


def test_folders_count_against_the_entry_limit(ada, settings, artifacts):
    settings.SWITCHYARD_MAX_ARCHIVE_FILES = len(GOOD) + 2
    folders = [(f"1/d{i}/", "dir", None) for i in range(5)]
    message = _refusal(upload(ada, tar_gz([*GOOD, *folders])))
    assert f"more than {len(GOOD) + 2} files and folders" in message
    assert _nothing_stored(artifacts)


def test_a_gzip_bomb_is_refused_by_the_compression_ratio(ada, artifacts):
    archive = tar_gz([*GOOD, ("1/zeros.bin", bytes(20 * MIB))])
    message = _refusal(upload(ada, archive))
    assert "more than 100 times its own size" in message
    assert _nothing_stored(artifacts)


def test_the_total_unpacked_size_has_its_own_limit(ada, settings, artifacts):
    settings.SWITCHYARD_MAX_UNPACKED_BYTES = 2 * MIB
    archive = tar_gz([*GOOD, ("1/noise.bin", os.urandom(3 * MIB))])
    assert f"unpacks to more than {2 * MIB} bytes" in _refusal(upload(ada, archive))
    assert _nothing_stored(artifacts)


def test_a_zip_bomb_is_refused_from_its_declared_sizes_before_any_byte_is_written(ada, artifacts):
    archive = zip_bytes([*GOOD, ("1/zeros.bin", bytes(20 * MIB))])
    message = _refusal(upload(ada, archive, filename="m.zip"))
    assert "more than 100 times its own size" in message
    assert _nothing_stored(artifacts)


def test_a_zip_with_too_many_entries_is_refused_before_its_directory_is_read(ada, settings):
    settings.SWITCHYARD_MAX_ARCHIVE_FILES = 10
    entries = [*GOOD, *[(f"1/d{i}/", b"") for i in range(20)]]
    message = _refusal(upload(ada, zip_bytes(entries), filename="m.zip"))
    assert "more than 10 files and folders" in message


def test_zip_members_compressed_with_bzip2_are_refused(ada):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_BZIP2) as archive:
        for name, data in GOOD:
            archive.writestr(name, data)
    message = _refusal(upload(ada, buf.getvalue(), filename="m.zip"))
    assert "only stored and deflated members" in message


def test_an_ordinary_model_with_long_names_still_registers(ada):
    long_name = "1/" + "x" * 150 + ".bin"  # a GNU/pax long name of normal size
    response = upload(ada, tar_gz([*GOOD, (long_name, b"weights")]))
    assert response.status_code == 201, response.content


def test_a_zip_member_bigger_than_it_declares_is_cut_at_its_declared_size_and_refused(
    ada, artifacts
):
    archive = bytearray(zip_bytes([*GOOD, ("1/zeros.bin", bytes(MIB))]))
    entry = archive.rindex(b"PK\x01\x02")  # the last central directory entry: 1/zeros.bin
    archive[entry + 24 : entry + 28] = (1000).to_bytes(4, "little")  # declares 1000 bytes
    message = _refusal(upload(ada, bytes(archive), filename="m.zip"))
    assert "damaged" in message and "CRC" in message
    assert _nothing_stored(artifacts)

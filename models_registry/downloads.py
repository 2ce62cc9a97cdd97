"""Stored versions as a .tar.gz: the Triton model directory, files byte for byte."""

import gzip
import tarfile
import tempfile

from models_registry.models import ModelVersion
from models_registry.storage import blob_open


def version_archive(version: ModelVersion) -> tempfile.SpooledTemporaryFile:
    """A reproducible tar.gz (sorted, fixed owner and times) of config.pbtxt + <N>/files."""
    out = tempfile.SpooledTemporaryFile(max_size=16 * 1024 * 1024)
    mtime = int(version.created_at.timestamp())
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=mtime) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for entry in sorted(version.manifest, key=lambda e: (e["role"] != "config", e["path"])):
                name = (
                    "config.pbtxt"
                    if entry["role"] == "config"
                    else (f"{version.version}/{entry['path']}")
                )
                info = tarfile.TarInfo(f"{version.model.name}/{name}")
                info.size, info.mtime, info.mode = entry["size"], mtime, 0o644
                with blob_open(entry["sha256"]) as handle:
                    tar.addfile(info, handle)
    out.seek(0)
    return out

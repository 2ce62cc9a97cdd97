"""Build upload archives for tests: real tar.gz / zip bytes, including hostile ones."""

import io
import tarfile
import time
import zipfile
from pathlib import Path

from tests.exampledata import EXAMPLES


def tar_gz(entries: list[tuple], *, raw: bool = False) -> bytes:
    """entries: (name, bytes) for files, or (name, kind, target) with kind in
    'dir' | 'symlink' | 'hardlink' | 'chardev' | 'fifo'. raw: the tar stream, not gzipped."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w" if raw else "w:gz") as tar:
        for entry in entries:
            name = entry[0]
            info = tarfile.TarInfo(name)
            info.mtime = int(time.time())
            if len(entry) == 2:
                info.size = len(entry[1])
                tar.addfile(info, io.BytesIO(entry[1]))
                continue
            kind, target = entry[1], entry[2]
            info.type = {
                "dir": tarfile.DIRTYPE,
                "symlink": tarfile.SYMTYPE,
                "hardlink": tarfile.LNKTYPE,
                "chardev": tarfile.CHRTYPE,
                "fifo": tarfile.FIFOTYPE,
            }[kind]
            info.linkname = target or ""
            tar.addfile(info)
    return buf.getvalue()


def zip_bytes(entries: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            archive.writestr(name, data)
    return buf.getvalue()


def example_entries(model: str, version: int, *, folder: str | None = None) -> list[tuple]:
    """The example model directory as archive entries (config + one version folder)."""
    root = EXAMPLES / model
    entries = [("config.pbtxt", (root / "config.pbtxt").read_bytes())]
    vdir = root / str(version)
    for path in sorted(vdir.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            rel = path.relative_to(vdir).as_posix()
            entries.append((f"{folder or version}/{rel}", path.read_bytes()))
    return entries


def example_files(model: str, version: int) -> dict[str, bytes]:
    """{version-relative path: bytes} of an example version, plus config.pbtxt."""
    root = EXAMPLES / model
    files = {"config.pbtxt": (root / "config.pbtxt").read_bytes()}
    vdir: Path = root / str(version)
    for path in sorted(vdir.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            files[path.relative_to(vdir).as_posix()] = path.read_bytes()
    return files


def register_risk_score_as(model, user, variant: int, **faults: float):
    """Register an example risk_score variant under `model`'s own name (config renamed);
    `faults` (failure_rate, extra_ms) are written to the faulty-by-setting variant's (5)
    faults.json."""
    import io
    import json

    from models_registry.services import model_version_register

    entries = example_entries("risk_score", variant)
    config = entries[0][1].replace(b'name: "risk_score"', f'name: "{model.name}"'.encode())
    if faults:
        written = json.dumps({"healthy_requests": 2, **faults}).encode()
        entries = [(n, written if n.endswith("/faults.json") else b) for n, b in entries]
    archive = io.BytesIO(tar_gz([("config.pbtxt", config), *entries[1:]]))
    return model_version_register(model=model, archive=archive, actor=user)


def tar_gz_with_extension_headers(headers: list[tuple[bytes, int]], entries: list[tuple]) -> bytes:
    """A .tar.gz whose first member is preceded by raw extension headers: (type, size) each,
    e.g. (tarfile.GNUTYPE_LONGNAME, 80 MiB). Their content is streamed, never held whole."""
    import gzip

    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9) as gz:
        for kind, size in headers:
            info = tarfile.TarInfo("././@LongLink")
            info.type, info.size = kind, size
            gz.write(info.tobuf(format=tarfile.GNU_FORMAT))
            block = b"a" * (1024 * 1024)
            for start in range(0, size, len(block)):
                gz.write(block[: min(len(block), size - start)])
            gz.write(bytes(-size % tarfile.BLOCKSIZE))
        gz.write(tar_gz(entries, raw=True))
    return buf.getvalue()


def upload(client, archive: bytes, filename: str = "m.tar.gz"):
    """POST an archive as a new version of risk_score."""
    payload = io.BytesIO(archive)
    payload.name = filename
    return client.post(
        "/api/v1/models/risk_score/versions/", {"archive": payload}, format="multipart"
    )

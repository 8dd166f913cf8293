"""The ``.stcobj`` artifact: one zip file holding a compiled model and its provenance.

Members:

* ``meta.json``: :class:`ArtifactMeta` (format version, graphtune and TVM
  versions, model name, workload key, target key and hash, input/output names,
  shapes and dtypes, creation time, build timings);
* ``schedule.json``: the :class:`~compiler.schedule.GraphSchedule` that was applied;
* ``ir.txt``: the scheduled Relax module as TVMScript (without the constants'
  metadata section, so it is for reading, not for parsing back);
* ``lib.so``: the library from ``tvm.compile(...).export_library`` (the Relax VM
  executable plus the host-CPU kernels, constants embedded).

Reading the metadata needs neither TVM nor the library (:func:`read_meta`).
Loading the library (see :mod:`compiler.executor`) runs native code: only load
artifacts you trust, as with any shared library.

Example:
    >>> meta = read_meta("resnet50.stcobj")
    >>> meta.model, meta.workload_key, [i.shape for i in meta.inputs]
    ('resnet50', '5c1f...', [(16, 3, 224, 224)])
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compiler.errors import CompileError

FORMAT_VERSION = 1
KIND = "graphtune.stcobj"
META = "meta.json"
SCHEDULE = "schedule.json"
IR = "ir.txt"
LIB = "lib.so"
MEMBERS = (META, SCHEDULE, IR, LIB)


@dataclass(frozen=True)
class TensorInfo:
    """Name, shape and dtype of a model input or output.

    ``int_high`` is set for integer inputs used as indices (token ids, feature
    indices): valid values are ``0 <= x < int_high``. It lets ``graphtune run``
    make valid random data; None when unknown.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    int_high: int | None = None

    def to_json(self) -> dict[str, Any]:
        """Keyed JSON."""
        d: dict[str, Any] = {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}
        if self.int_high is not None:
            d["int_high"] = self.int_high
        return d

    @classmethod
    def from_json(cls, d: Any) -> TensorInfo:
        """Inverse of :meth:`to_json`."""
        if not isinstance(d, dict):
            raise ValueError("tensor info must be an object")
        high = d.get("int_high")
        return cls(
            name=str(d["name"]),
            shape=tuple(int(x) for x in d["shape"]),
            dtype=str(d["dtype"]),
            int_high=None if high is None else int(high),
        )


@dataclass(frozen=True)
class ArtifactMeta:
    """What ``meta.json`` says about an artifact. Frozen; JSON round-trippable."""

    model: str
    workload_key: str
    target_key: str
    target_hash: str
    batch: int
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    schedule_source: str = ""
    graphtune_version: str = ""
    tvm_version: str = ""
    created: str = ""  # ISO 8601, UTC
    timings_s: Mapping[str, float] = field(default_factory=dict, hash=False)
    format_version: int = FORMAT_VERSION

    def to_json(self) -> dict[str, Any]:
        """Keyed JSON object."""
        return {
            "kind": KIND,
            "format_version": self.format_version,
            "graphtune_version": self.graphtune_version,
            "tvm_version": self.tvm_version,
            "created": self.created,
            "model": self.model,
            "workload_key": self.workload_key,
            "target_key": self.target_key,
            "target_hash": self.target_hash,
            "batch": self.batch,
            "schedule_source": self.schedule_source,
            "inputs": [t.to_json() for t in self.inputs],
            "outputs": [t.to_json() for t in self.outputs],
            "timings_s": {k: round(float(v), 4) for k, v in self.timings_s.items()},
        }

    @classmethod
    def from_json(cls, d: Any, source: str = "artifact") -> ArtifactMeta:
        """Parse ``meta.json``; raises CompileError for another kind or a newer format."""
        if not isinstance(d, dict) or d.get("kind") != KIND:
            raise CompileError(f"{source} is not a graphtune .stcobj artifact (bad meta.json)")
        version = d.get("format_version")
        if not isinstance(version, int) or isinstance(version, bool):
            raise CompileError(f"{source}: meta.json has no integer format_version")
        if version > FORMAT_VERSION:
            raise CompileError(
                f"{source} has artifact format {version}, newer than this graphtune "
                f"({FORMAT_VERSION}): upgrade graphtune"
            )
        try:
            return cls(
                model=str(d["model"]),
                workload_key=str(d["workload_key"]),
                target_key=str(d["target_key"]),
                target_hash=str(d["target_hash"]),
                batch=int(d["batch"]),
                inputs=tuple(TensorInfo.from_json(t) for t in d["inputs"]),
                outputs=tuple(TensorInfo.from_json(t) for t in d["outputs"]),
                schedule_source=str(d.get("schedule_source", "")),
                graphtune_version=str(d.get("graphtune_version", "")),
                tvm_version=str(d.get("tvm_version", "")),
                created=str(d.get("created", "")),
                timings_s={str(k): float(v) for k, v in d.get("timings_s", {}).items()},
                format_version=version,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CompileError(f"{source}: meta.json is malformed ({_why(exc)})") from None


def write_artifact(
    path: str | os.PathLike[str],
    lib_path: str | os.PathLike[str],
    schedule_json: str,
    ir_text: str,
    meta: ArtifactMeta,
) -> int:
    """Write a ``.stcobj`` atomically (temp file in the same directory, then rename).

    Args:
        path: Destination; its directory must exist. An existing file is replaced
            only once the new one is complete.
        lib_path: The library written by ``export_library``.
        schedule_json: ``GraphSchedule.dumps()`` text.
        ir_text: The scheduled module's TVMScript.
        meta: The metadata.

    Returns:
        The artifact's size in bytes.

    Raises:
        CompileError: The destination cannot be written.
    """
    dest = Path(path)
    directory = dest.parent if str(dest.parent) else Path(".")
    if not directory.is_dir():
        raise CompileError(f"cannot write {dest}: directory {directory} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{dest.name}-", suffix=".tmp")
    except OSError as exc:
        raise CompileError(f"cannot write {dest}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w") as zf:
            text = zipfile.ZIP_DEFLATED
            zf.writestr(META, json.dumps(meta.to_json(), indent=1), compress_type=text)
            zf.writestr(SCHEDULE, schedule_json, compress_type=text)
            zf.writestr(IR, ir_text, compress_type=text)
            # Stored, not deflated: the library is mostly weights, which do not compress.
            zf.write(lib_path, LIB, compress_type=zipfile.ZIP_STORED)
        os.replace(tmp, dest)
    except OSError as exc:
        _unlink(tmp)
        raise CompileError(f"cannot write {dest}: {exc.strerror or exc}") from None
    except BaseException:
        _unlink(tmp)
        raise
    return dest.stat().st_size


def _open(path: str | os.PathLike[str]) -> zipfile.ZipFile:
    p = Path(path)
    if not p.exists():
        raise CompileError(f"no such artifact: {p}")
    if p.is_dir():
        raise CompileError(f"{p} is a directory, not a .stcobj artifact")
    try:
        zf = zipfile.ZipFile(p)
    except (zipfile.BadZipFile, OSError):
        raise CompileError(f"{p} is not a .stcobj artifact (not a zip archive, or truncated)") \
            from None
    names = set(zf.namelist())
    missing = [m for m in MEMBERS if m not in names]
    if missing:
        zf.close()
        raise CompileError(f"{p} is not a .stcobj artifact (missing {', '.join(missing)})")
    return zf


def _read_member(zf: zipfile.ZipFile, member: str, source: Path) -> bytes:
    try:
        return zf.read(member)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise CompileError(f"{source}: {member} is corrupt ({_why(exc)})") from None


def read_meta(path: str | os.PathLike[str]) -> ArtifactMeta:
    """The artifact's metadata, without TVM and without touching the library.

    Raises:
        CompileError: Not an artifact, truncated, or a newer format version.
    """
    p = Path(path)
    with _open(p) as zf:
        raw = _read_member(zf, META, p)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise CompileError(f"{p} is not a .stcobj artifact (meta.json is not JSON)") from None
    return ArtifactMeta.from_json(data, source=str(p))


def read_text(path: str | os.PathLike[str], member: str) -> str:
    """One text member (``schedule.json`` or ``ir.txt``)."""
    if member not in (SCHEDULE, IR, META):
        raise CompileError(f"unknown artifact member {member!r}: use {SCHEDULE}, {IR} or {META}")
    p = Path(path)
    with _open(p) as zf:
        raw = _read_member(zf, member, p)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CompileError(f"{p}: {member} is not UTF-8 text") from None


def extract_library(path: str | os.PathLike[str], directory: str | os.PathLike[str]) -> Path:
    """Copy ``lib.so`` out of the artifact into ``directory``; returns the file's path.

    Only the fixed member name is read (no ``extractall``), so member paths in a
    hand-made archive cannot escape ``directory``.
    """
    p = Path(path)
    out = Path(directory) / LIB
    with _open(p) as zf:
        try:
            with zf.open(LIB) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except (zipfile.BadZipFile, EOFError) as exc:
            raise CompileError(f"{p}: {LIB} is corrupt ({_why(exc)})") from None
    return out


def _unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__

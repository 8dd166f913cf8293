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
import dataclasses
import hashlib
import json
import math
import os
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from compiler.errors import CompileError, OutputError

FORMAT_VERSION = 2  # 2: meta.json holds lib_sha256 and lib_bytes, int_low for index inputs
KIND = "graphtune.stcobj"
META = "meta.json"
SCHEDULE = "schedule.json"
IR = "ir.txt"
LIB = "lib.so"
MEMBERS = (META, SCHEDULE, IR, LIB)
# Largest member sizes read into memory; a zip bomb stops at these.
MAX_MEMBER_BYTES = {META: 1 << 20, SCHEDULE: 8 << 20, IR: 256 << 20}
MAX_MEMBERS = 64  # an artifact has 4; a zip with thousands of entries is refused unread
MAX_TENSOR_ELEMENTS = 1 << 32
DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64")
_CHUNK = 1 << 20

_DIM = {"type": "integer", "minimum": 0, "maximum": 1 << 31}
_TEXT = {"type": "string", "maxLength": 4096}
_TENSOR = {
    "type": "object",
    "required": ["name", "shape", "dtype"],
    "properties": {
        "name": {"type": "string", "maxLength": 4096},
        "shape": {"type": "array", "items": _DIM, "maxItems": 16},
        "dtype": {"enum": list(DTYPES)},
        "int_high": {"type": ["integer", "null"], "minimum": 1, "maximum": 1 << 62},
        "int_low": {"type": ["integer", "null"], "minimum": -(1 << 62), "maximum": 0},
    },
}
META_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "graphtune .stcobj meta.json",
    "type": "object",
    "required": ["kind", "format_version", "model", "workload_key", "target_key",
                 "target_hash", "batch", "inputs", "outputs"],
    "properties": {
        "kind": {"const": KIND},
        "format_version": {"type": "integer", "minimum": 1},
        "model": _TEXT,
        "workload_key": _TEXT,
        "target_key": _TEXT,
        "target_hash": _TEXT,
        "batch": {"type": "integer", "minimum": 1, "maximum": 1 << 31},
        "schedule_source": _TEXT,
        "graphtune_version": _TEXT,
        "tvm_version": _TEXT,
        "created": _TEXT,
        "inputs": {"type": "array", "items": _TENSOR, "maxItems": 4096},
        "outputs": {"type": "array", "items": _TENSOR, "maxItems": 4096},
        "timings_s": {"type": "object", "maxProperties": 64,
                      "additionalProperties": {"type": "number"}},
        "lib_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "lib_bytes": {"type": "integer", "minimum": 0, "maximum": 1 << 40},
    },
}
"""What ``meta.json`` may hold (draft 2020-12); checked before anything is used."""


@dataclass(frozen=True)
class TensorInfo:
    """Name, shape and dtype of a model input or output.

    For integer inputs used as indices (token ids, feature indices), valid
    values are ``int_low <= x < int_high``: ``int_high`` is the gathered table's
    size and ``int_low`` is ``-int_high`` when the model maps negative indices
    to the table's end (as ONNX ``Gather`` does), else 0 (also when None). The executor refuses
    values outside the range (an index out of range reads arbitrary memory in
    the CPU build); ``graphtune run`` makes random data in ``[0, int_high)``.
    Both are None when unknown.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    int_high: int | None = None
    int_low: int | None = None

    def to_json(self) -> dict[str, Any]:
        """Keyed JSON."""
        d: dict[str, Any] = {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}
        if self.int_high is not None:
            d["int_high"] = self.int_high
        if self.int_low is not None:
            d["int_low"] = self.int_low
        return d

    @classmethod
    def from_json(cls, d: Any) -> TensorInfo:
        """Inverse of :meth:`to_json` (``d`` already checked against :data:`META_SCHEMA`)."""
        if not isinstance(d, dict):
            raise ValueError("tensor info must be an object")
        high, low = d.get("int_high"), d.get("int_low")
        return cls(
            name=str(d["name"]),
            shape=tuple(int(x) for x in d["shape"]),
            dtype=str(d["dtype"]),
            int_high=None if high is None else int(high),
            int_low=None if low is None else int(low),
        )

    @property
    def elements(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)


@dataclass(frozen=True)
class ArtifactMeta:
    """What ``meta.json`` says about an artifact. Frozen; JSON round-trippable.

    ``lib_sha256`` and ``lib_bytes`` describe ``lib.so``: the library is loaded
    only when it matches them (format 2; format 1 artifacts have neither and
    their library is not loaded).
    """

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
    lib_sha256: str = ""
    lib_bytes: int = 0

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
            **({"lib_sha256": self.lib_sha256, "lib_bytes": self.lib_bytes}
               if self.lib_sha256 else {}),
        }

    @classmethod
    def from_json(cls, d: Any, source: str = "artifact") -> ArtifactMeta:
        """Parse ``meta.json``; raises CompileError for another kind, a newer format or bad values."""
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
        problem = _schema_problem(d)
        if problem:
            raise CompileError(f"{source}: meta.json is malformed ({problem})")
        try:
            meta = cls(
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
                lib_sha256=str(d.get("lib_sha256", "")),
                lib_bytes=int(d.get("lib_bytes", 0)),
            )
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise CompileError(f"{source}: meta.json is malformed ({_why(exc)})") from None
        for t in (*meta.inputs, *meta.outputs):
            if t.elements > MAX_TENSOR_ELEMENTS:
                raise CompileError(
                    f"{source}: meta.json is malformed (tensor {t.name[:64]!r} has "
                    f"{t.elements} elements, more than {MAX_TENSOR_ELEMENTS})"
                )
        return meta


_validator: Any = None


def _schema_problem(d: dict[str, Any]) -> str | None:
    """The first way ``d`` breaks :data:`META_SCHEMA` (path and reason), or None."""
    global _validator
    import jsonschema

    from compiler._json_schema import first_problem

    if _validator is None:
        _validator = jsonschema.Draft202012Validator(META_SCHEMA)
    return first_problem(_validator, d, "meta")


def write_artifact(
    path: str | os.PathLike[str],
    lib_path: str | os.PathLike[str],
    schedule_json: str,
    ir_text: str,
    meta: ArtifactMeta,
    *,
    inputs: tuple[str | os.PathLike[str] | None, ...] = (),
) -> int:
    """Write a ``.stcobj`` atomically (:class:`compiler.files.AtomicFile`).

    ``meta``'s ``lib_sha256`` and ``lib_bytes`` are filled in from ``lib_path``.

    Args:
        path: Destination; its directory must exist. An existing regular file is
            replaced only once the new one is complete; anything else is refused.
        lib_path: The library written by ``export_library``.
        schedule_json: ``GraphSchedule.dumps()`` text.
        ir_text: The scheduled module's TVMScript.
        meta: The metadata.
        inputs: Files the artifact must not overwrite (the model it was built from).

    Returns:
        The artifact's size in bytes.

    Raises:
        CompileError: The destination cannot be written.
    """
    from compiler.files import AtomicFile

    try:
        digest, size = _sha256_file(lib_path)
        meta = dataclasses.replace(meta, lib_sha256=digest, lib_bytes=size)
        out = AtomicFile(path, inputs=inputs)
    except OSError as exc:
        raise CompileError(f"cannot write {os.fspath(path)}: {exc.strerror or exc}") from None
    except OutputError as exc:
        raise CompileError(str(exc)) from None
    try:
        with zipfile.ZipFile(out.file, "w") as zf:
            text = zipfile.ZIP_DEFLATED
            zf.writestr(META, json.dumps(meta.to_json(), indent=1), compress_type=text)
            zf.writestr(SCHEDULE, schedule_json, compress_type=text)
            zf.writestr(IR, ir_text, compress_type=text)
            # Stored, not deflated: the library is mostly weights, which do not compress.
            zf.write(lib_path, LIB, compress_type=zipfile.ZIP_STORED)
        return out.commit()
    except OSError as exc:
        out.discard()
        raise CompileError(f"cannot write {os.fspath(path)}: {exc.strerror or exc}") from None
    except OutputError as exc:
        raise CompileError(str(exc)) from None
    except BaseException:
        out.discard()
        raise


def _sha256_file(path: str | os.PathLike[str]) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def _open(path: str | os.PathLike[str]) -> zipfile.ZipFile:
    from compiler.files import open_input

    p = Path(path)
    f = open_input(p, "artifact", CompileError)
    try:
        _check_entry_count(f, p)
        zf = zipfile.ZipFile(f)
    except CompileError:
        f.close()
        raise
    except Exception:  # noqa: BLE001 - zipfile raises many kinds on a damaged archive
        f.close()
        raise CompileError(f"{p} is not a .stcobj artifact (not a zip archive, or truncated)") \
            from None
    names = set(zf.namelist())
    missing = [m for m in MEMBERS if m not in names]
    if missing:
        zf.close()
        raise CompileError(f"{p} is not a .stcobj artifact (missing {', '.join(missing)})")
    return zf


def _check_entry_count(f: IO[bytes], p: Path) -> None:
    """Refuse an archive whose directory lists more than :data:`MAX_MEMBERS` entries.

    ``zipfile`` reads the whole central directory into objects when it opens an
    archive; the end record says how many entries there are, so a hand-made zip
    with millions of them is refused before that.
    """
    end = zipfile._EndRecData(f)  # type: ignore[attr-defined]  # stable since Python 2
    if end is None:
        raise CompileError(f"{p} is not a .stcobj artifact (not a zip archive, or truncated)")
    count = end[zipfile._ECD_ENTRIES_TOTAL]  # type: ignore[attr-defined]
    if count > MAX_MEMBERS:
        raise CompileError(f"{p} is not a .stcobj artifact ({count} archive members)")
    f.seek(0)


def _read_member(zf: zipfile.ZipFile, member: str, source: Path) -> bytes:
    limit = MAX_MEMBER_BYTES[member]
    try:
        info = zf.getinfo(member)
        if info.file_size > limit:
            raise CompileError(
                f"{source}: {member} is {info.file_size} bytes, more than an artifact holds "
                f"({limit}): damaged or not an artifact"
            )
        with zf.open(info) as src:
            data = src.read(limit + 1)
    except CompileError:
        raise
    except Exception as exc:  # noqa: BLE001 - BadZipFile, zlib.error, encrypted, unsupported...
        raise CompileError(f"{source}: {member} is corrupt ({_why(exc)})") from None
    if len(data) > limit:
        raise CompileError(f"{source}: {member} is larger than {limit} bytes")
    return data


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
    except (UnicodeDecodeError, ValueError, RecursionError):
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


def extract_library(
    path: str | os.PathLike[str], directory: str | os.PathLike[str], meta: ArtifactMeta | None = None
) -> Path:
    """Copy ``lib.so`` out of the artifact into ``directory``; returns the file's path.

    Only the fixed member name is read (no ``extractall``), so member paths in a
    hand-made archive cannot escape ``directory``. With ``meta``, the library must
    have the size and SHA-256 that ``meta`` records: the archive's entry is
    checked before anything is copied, the copy stops at the recorded size, and
    a library that does not match is deleted and refused, never returned.

    Raises:
        CompileError: Not an artifact, a damaged library, or one that does not
            match ``meta``.
    """
    p = Path(path)
    out = Path(directory) / LIB
    with _open(p) as zf:
        info = zf.getinfo(LIB)
        if meta is not None:
            if info.file_size != meta.lib_bytes:
                raise CompileError(
                    f"{p}: {LIB} is {info.file_size} bytes but meta.json says {meta.lib_bytes}: "
                    "the artifact is damaged or was altered; recompile it"
                )
            # Hash before anything is written: a library that does not match never
            # reaches the disk, let alone the loader.
            if _member_sha256(zf, info, p) != meta.lib_sha256:
                raise CompileError(
                    f"{p}: {LIB} does not match the SHA-256 in meta.json: the artifact is "
                    "damaged or was altered, and its library is not loaded; recompile it"
                )
        try:
            with zf.open(info) as src, open(out, "wb") as dst:
                while chunk := src.read(_CHUNK):
                    dst.write(chunk)
        except OSError as exc:
            _unlink(out)
            raise CompileError(f"{p}: cannot extract {LIB} ({exc.strerror or _why(exc)})") \
                from None
        except Exception as exc:  # noqa: BLE001 - BadZipFile, zlib.error, encrypted...
            _unlink(out)
            raise CompileError(f"{p}: {LIB} is corrupt ({_why(exc)})") from None
    return out


def _member_sha256(zf: zipfile.ZipFile, info: zipfile.ZipInfo, p: Path) -> str:
    h = hashlib.sha256()
    try:
        with zf.open(info) as src:
            while chunk := src.read(_CHUNK):
                h.update(chunk)
    except Exception as exc:  # noqa: BLE001 - BadZipFile, zlib.error, encrypted...
        raise CompileError(f"{p}: {LIB} is corrupt ({_why(exc)})") from None
    return h.hexdigest()


def _unlink(path: str | os.PathLike[str]) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__

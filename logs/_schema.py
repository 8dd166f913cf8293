"""Record versions, structure checks and the upgrade of older layouts.

Reading happens millions of times per load, so the structure check is plain
``type(...) is`` tests on the decoded dict (no jsonschema on the hot path);
:data:`RECORD_SCHEMA` states the same rules as a JSON Schema, for tools and
for :func:`validate`, and a test keeps the two in agreement.

Versions (``"v": "major.minor"``):

* ``1.x``: read. A newer minor may add keys (kept on a rewrite) but never
  changes or removes one, nor adds a status code.
* ``2.0`` and later: refused with :class:`NewerVersionError`.
* ``0.9`` (the pre-release layout, ``"version": "0.9"``, no ``"v"``): upgraded
  on read by :func:`upgrade`; see ``logs/README.md``.
"""

from __future__ import annotations

import json
import json.scanner
import math
import zlib
from typing import Any

from logs._errors import LogError
from logs._status import SCHEMA_MAJOR, SCHEMA_VERSION, Status

_STATUSES = frozenset(s.value for s in Status)
_SCHED = b',"schedule":'
_CRC = b',"crc32":'
# The C scanner behind json.loads, minus the wrapper's per-call overhead.
_scan_once = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]
_EMPTY: dict[str, Any] = {}


class NewerVersionError(LogError):
    """A record was written by a newer graphtune (larger major version)."""

    def __init__(self, version: str, where: str = "a record") -> None:
        super().__init__(
            f"{where} has record version {version}, newer than this graphtune "
            f"({SCHEMA_MAJOR}.x): upgrade graphtune"
        )
        self.version = version


def major_of(version: Any) -> int | None:
    """The major number of a ``"major.minor"`` string, or None if it is not one."""
    if type(version) is not str:
        return None
    major, dot, minor = version.partition(".")
    if not dot or not major.isdigit() or not minor.isdigit():
        return None
    return int(major)


def upgrade(obj: Any) -> Any:
    """Return ``obj`` in the current major layout (the same object when already current).

    Unknown layouts are returned unchanged for :func:`check_record` to reject.

    Raises:
        NewerVersionError: ``obj`` has a newer major version.
    """
    if type(obj) is not dict:
        return obj
    version = obj.get("v")
    if version == SCHEMA_VERSION:
        return obj
    if version is None and obj.get("version") == "0.9":
        return _from_0_9(obj)
    major = major_of(version)
    if major is not None and major > SCHEMA_MAJOR:
        raise NewerVersionError(str(version))
    return obj


# 0.9 stored the status as TVM-style error numbers.
_STATUS_0_9 = {
    0: Status.OK.value,
    1: Status.INVALID_SCHEDULE.value,
    2: Status.CAPACITY.value,
    3: Status.SIM_ERROR.value,
    4: Status.TIMEOUT.value,
    5: Status.WORKER_LOST.value,
}


def _from_0_9(obj: dict[str, Any]) -> dict[str, Any]:
    """Upgrade a 0.9 record: flat layout, error numbers, ``-1`` for unmeasured numbers."""
    target = obj.get("target")
    chip, _, hash_ = target.partition(":") if isinstance(target, str) else ("", "", "")
    measurer = obj.get("measurer", "")
    name, _, version = measurer.partition("@") if isinstance(measurer, str) else ("", "", "")
    error_no = obj.get("error_no")
    status = _STATUS_0_9.get(error_no, f"error_no {error_no!r}") if type(error_no) is int else None
    latency = obj.get("latency_us")
    if isinstance(latency, int | float) and latency < 0:
        latency = None
    throughput = obj.get("throughput")
    if isinstance(throughput, int | float) and throughput < 0:
        throughput = None
    return {
        "v": "1.0",  # the layout 0.9 maps onto; it has none of the keys later minors added
        "workload": {
            "key": obj.get("workload_key"),
            "model": obj.get("model", ""),
            "input_shapes": obj.get("input_shapes", {}),
            "batch": obj.get("batch"),
        },
        "target": {"chip": chip, "hash": hash_},
        "result": {
            "status": status,
            "latency_us": latency,
            "throughput_per_s": throughput,
            "error": obj.get("error_msg", ""),
        },
        "prov": {
            "measurer": name,
            "measurer_version": version,
            "tuner": obj.get("tuner", ""),
            "study": "",
            "trial": obj.get("trial"),
            "time_unix_s": obj.get("timestamp"),
            "host": "",
        },
        "schedule": obj.get("schedule"),
    }


def _bad_name(value: Any) -> bool:
    return type(value) is not str or not value or ":" in value or value != value.strip()


def _bad_number(value: Any) -> bool:
    # NaN fails the comparison; bool is excluded by the exact type test.
    return (type(value) is not float and type(value) is not int) or not 0 <= value < math.inf


def check_record(obj: Any, with_schedule: bool = True) -> str | None:
    """Return what is wrong with a current-layout record object, or None if it is fine.

    Args:
        obj: A decoded JSON value (after :func:`upgrade`).
        with_schedule: Check the schedule too; False for a header whose schedule
            bytes were verified by their CRC instead (:func:`split_line`).
    """
    if type(obj) is not dict:
        return "not a JSON object"
    version = obj.get("v")
    if version != SCHEMA_VERSION and major_of(version) != SCHEMA_MAJOR:
        return f"unsupported record version {version!r}"
    w = obj.get("workload")
    if type(w) is not dict:
        return "'workload' is missing or not an object"
    if type(w.get("key")) is not str or not w["key"]:
        return "workload.key must be a non-empty string"
    if type(w.get("model", "")) is not str:
        return "workload.model must be a string"
    shapes = w.get("input_shapes", _EMPTY)
    if type(shapes) is not dict:
        return "workload.input_shapes must be an object"
    for shape in shapes.values():
        if type(shape) is not list or any(type(d) is not int for d in shape):
            return "workload.input_shapes values must be lists of integers"
    batch = w.get("batch")
    if type(batch) is not int or batch < 1:
        return "workload.batch must be an integer >= 1"
    t = obj.get("target")
    if type(t) is not dict or len(t) != 2 or _bad_name(t.get("chip")) or _bad_name(t.get("hash")):
        return "'target' must be {\"chip\": ..., \"hash\": ...} (non-empty, no ':')"
    r = obj.get("result")
    if type(r) is not dict:
        return "'result' is missing or not an object"
    status = r.get("status")
    if type(status) is not str or status not in _STATUSES:  # a list would not even hash
        return f"result.status {status!r} is not one of {', '.join(sorted(_STATUSES))}"
    latency = r.get("latency_us")
    if latency is not None and _bad_number(latency):
        return "result.latency_us must be a finite number >= 0 or null"
    if status == "ok" and not latency:
        return "an ok result needs latency_us > 0"
    throughput = r.get("throughput_per_s")
    if throughput is not None and _bad_number(throughput):
        return "result.throughput_per_s must be a finite number >= 0 or null"
    bound = r.get("lower_bound_us")
    if bound is not None and _bad_number(bound):
        return "result.lower_bound_us must be a finite number >= 0 or null"
    if type(r.get("error", "")) is not str:
        return "result.error must be a string"
    p = obj.get("prov")
    if type(p) is not dict:
        return "'prov' is missing or not an object"
    if _bad_number(p.get("time_unix_s")):
        return "prov.time_unix_s must be a finite number >= 0"
    trial = p.get("trial")
    if trial is not None and type(trial) is not int:
        return "prov.trial must be an integer or null"
    for name in ("measurer", "measurer_version", "tuner", "study", "host", "cost_model"):
        if type(p.get(name, "")) is not str:
            return f"prov.{name} must be a string"
    if type(p.get("params", _EMPTY)) is not dict:
        return "prov.params must be an object"
    if with_schedule:
        s = obj.get("schedule")
        if type(s) is not dict or "v" not in s or "batch" not in s:
            return "'schedule' must be an object with keys 'v' and 'batch'"
    return None


def split_line(line: bytes) -> tuple[dict[str, Any], bytes] | None:
    """Decode the header of a line written by :meth:`Record.to_line_bytes`, when intact.

    Such a line ends with ``,"schedule":<json>,"crc32":<n>}`` where ``n`` is
    the CRC-32 of everything before ``,"crc32":``. When the CRC matches, the
    line is whole and was checked by the writer; only the text before the
    first ``,"schedule":`` is decoded (that text plus ``}`` decodes only when
    the key is the top-level one), and the schedule's bytes are returned as is.

    Returns:
        ``(header, schedule_bytes)``, or None when the fast path does not apply
        (another writer, a hand-edited or damaged line): decode it whole then.
    """
    body = line.rstrip()
    k = body.rfind(_CRC)
    if k < 0 or not body.endswith(b"}"):
        return None
    digits = body[k + len(_CRC) : -1]
    if not digits.isdigit() or zlib.crc32(memoryview(body)[:k]) != int(digits):
        return None
    i = body.find(_SCHED, 0, k)
    if i < 0:
        return None
    try:
        text = body[:i].decode("utf-8") + "}"
        head, end = _scan_once(text, 0)
    except (StopIteration, ValueError, RecursionError):
        return None
    if end != len(text) or type(head) is not dict:
        return None
    return head, body[i + len(_SCHED) : k]


_STR = {"type": "string"}
_NAME = {"type": "string", "minLength": 1, "pattern": "^[^:\\s]([^:]*[^:\\s])?$"}
_NUM_OR_NULL = {"anyOf": [{"type": "number", "minimum": 0}, {"type": "null"}]}

RECORD_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": f"graphtune tuning record {SCHEMA_MAJOR}.x",
    "type": "object",
    "required": ["v", "workload", "target", "result", "prov", "schedule"],
    "properties": {
        "v": {"type": "string", "pattern": f"^{SCHEMA_MAJOR}\\.[0-9]+$"},
        "workload": {
            "type": "object",
            "required": ["key", "batch"],
            "properties": {
                "key": {"type": "string", "minLength": 1},
                "model": _STR,
                "input_shapes": {
                    "type": "object",
                    "additionalProperties": {"type": "array", "items": {"type": "integer"}},
                },
                "batch": {"type": "integer", "minimum": 1},
            },
        },
        "target": {
            "type": "object",
            "required": ["chip", "hash"],
            "additionalProperties": False,
            "properties": {"chip": _NAME, "hash": _NAME},
        },
        "result": {
            "type": "object",
            "required": ["status"],
            "properties": {
                "status": {"enum": sorted(_STATUSES)},
                "latency_us": _NUM_OR_NULL,
                "throughput_per_s": _NUM_OR_NULL,
                "error": _STR,
                "lower_bound_us": _NUM_OR_NULL,
            },
            "if": {"properties": {"status": {"const": "ok"}}},
            "then": {
                "required": ["latency_us"],
                "properties": {"latency_us": {"type": "number", "exclusiveMinimum": 0}},
            },
        },
        "prov": {
            "type": "object",
            "required": ["time_unix_s"],
            "properties": {
                "measurer": _STR,
                "measurer_version": _STR,
                "tuner": _STR,
                "study": _STR,
                "trial": {"type": ["integer", "null"]},
                "time_unix_s": {"type": "number", "minimum": 0},
                "host": _STR,
                "params": {"type": "object"},
                "cost_model": _STR,
            },
        },
        "schedule": {"type": "object", "required": ["v", "batch"]},
        "crc32": {"type": "integer", "minimum": 0},
    },
}
"""The structure of a current-major record as a JSON Schema (draft 2020-12)."""


def validate(obj: Any) -> None:
    """Validate one decoded record with jsonschema against :data:`RECORD_SCHEMA`.

    Slow next to the reader's own checks; meant for tools and tests.

    Raises:
        LogError: The object does not match; the message names the failing path.
    """
    import jsonschema

    try:
        jsonschema.validate(obj, RECORD_SCHEMA)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "record"
        raise LogError(f"malformed record at {where}: {exc.message}") from None

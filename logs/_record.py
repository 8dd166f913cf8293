"""Record value types: one measurement of one schedule of one workload on one target.

A :class:`Record` is a frozen snapshot; :meth:`Record.to_json` and
:meth:`Record.from_json` convert it to and from the keyed JSON object stored on
one line of a log (see ``logs/README.md`` for the format and the versioning
rules). Schedules are opaque JSON objects here: the compiler owns their
meaning, ``logs`` only requires the keys ``"v"`` and ``"batch"``. A schedule may
be any ``Mapping``; a :class:`logs.ScheduleText` (the object as its line's text
already) is copied into the line instead of dumped again.
"""

from __future__ import annotations

import json
import math
import socket
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from logs._errors import LogError

# re-exported: they were defined here before logs._status
from logs._status import SCHEMA_MAJOR as SCHEMA_MAJOR
from logs._status import SCHEMA_VERSION as SCHEMA_VERSION
from logs._status import Status as Status
from logs._text import LINE_JSON, ScheduleText

IndexKey = tuple[str, str, str]
"""``(workload_key, chip, hash)``: what records are grouped and ranked by."""


@dataclass(frozen=True, order=True)
class TargetKey:
    """The identity of a target: chip name and hash of its hardware file.

    Its string form, ``"<chip>:<hash>"``, is what the compiler passes to the
    dispatch hook (:func:`target_key_str`, :meth:`parse`).
    """

    chip: str
    hash: str

    def __post_init__(self) -> None:
        for name, value in (("chip", self.chip), ("hash", self.hash)):
            if not isinstance(value, str) or not value or ":" in value or value != value.strip():
                raise ValueError(
                    f"target {name} must be a non-empty string without ':', got {value!r}"
                )

    def __str__(self) -> str:
        return f"{self.chip}:{self.hash}"

    @classmethod
    def parse(cls, text: str) -> TargetKey:
        """Parse ``"<chip>:<hash>"``.

        Raises:
            LogError: ``text`` is not of that form.
        """
        chip, sep, hash_ = text.partition(":")
        try:
            if not sep:
                raise ValueError(text)
            return cls(chip, hash_)
        except ValueError:
            raise LogError(f"bad target key {text!r}: expected '<chip>:<hash>'") from None

    def to_json(self) -> dict[str, Any]:
        """The ``"target"`` object of a record."""
        return {"chip": self.chip, "hash": self.hash}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> TargetKey:
        """Inverse of :meth:`to_json`."""
        return cls(obj["chip"], obj["hash"])


def target_key_str(chip: str, hash: str) -> str:
    """The dispatch-hook form of a target key: ``"<chip>:<hash>"``."""
    return str(TargetKey(chip, hash))


def parse_target_key(text: str) -> TargetKey:
    """Inverse of :func:`target_key_str` (raises :class:`LogError` if malformed)."""
    return TargetKey.parse(text)


@dataclass(frozen=True)
class WorkloadInfo:
    """A workload key and the human summary shown next to it.

    Attributes:
        key: Stable hex hash of the graph's structure and shapes (from the compiler).
        model: Model name, e.g. ``"resnet50"``.
        input_shapes: Input name to shape (batch included).
        batch: Batch size the workload was built for.
        extra: Keys from a newer minor version, kept so they survive a rewrite.
    """

    key: str
    model: str = ""
    input_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    batch: int = 1
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise ValueError(f"workload key must be a non-empty string, got {self.key!r}")
        _check_extra(self.extra, _WORKLOAD_KEYS, "workload")

    def summary(self) -> str:
        """``"resnet50 data=8x3x224x224"``-style one-liner."""
        shapes = " ".join(
            f"{name}={'x'.join(str(d) for d in shape)}" for name, shape in self.input_shapes.items()
        )
        return f"{self.model or '?'} {shapes}".strip()

    def to_json(self) -> dict[str, Any]:
        """The ``"workload"`` object of a record."""
        return {
            "key": self.key,
            "model": self.model,
            "input_shapes": {name: list(shape) for name, shape in self.input_shapes.items()},
            "batch": self.batch,
            **self.extra,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> WorkloadInfo:
        """Inverse of :meth:`to_json` (structure checked by the caller)."""
        return cls(
            key=obj["key"],
            model=obj.get("model", ""),
            input_shapes={n: tuple(s) for n, s in obj.get("input_shapes", {}).items()},
            batch=obj["batch"],
            extra=_extra(obj, _WORKLOAD_KEYS),
        )


@dataclass(frozen=True)
class Result:
    """What a measurement found.

    Attributes:
        status: Outcome; only ``Status.OK`` results rank.
        latency_us: Latency of one batch in microseconds (required when ok).
        throughput_per_s: Samples per second.
        error: Message of a failed measurement (empty when ok).
        lower_bound_us: The roofline lower bound of the workload's latency on the
            target (``sim.lower_bound``), since 1.2; None when unknown.
        extra: Keys from a newer minor version.
    """

    status: Status
    latency_us: float | None = None
    throughput_per_s: float | None = None
    error: str = ""
    lower_bound_us: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))
        for name in ("latency_us", "throughput_per_s", "lower_bound_us"):
            value = getattr(self, name)
            if value is not None:
                if not math.isfinite(value) or value < 0:
                    raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
                object.__setattr__(self, name, float(value))
        if self.status is Status.OK and not self.latency_us:
            raise ValueError("an ok result needs latency_us > 0")
        _check_extra(self.extra, _RESULT_KEYS, "result")

    @property
    def is_valid(self) -> bool:
        """True for a successful measurement (the only kind that can be best)."""
        return self.status is Status.OK

    def to_json(self) -> dict[str, Any]:
        """The ``"result"`` object of a record (``lower_bound_us`` only when known, so a
        1.0/1.1 record is written back exactly as it was read)."""
        out: dict[str, Any] = {
            "status": self.status.value,
            "latency_us": self.latency_us,
            "throughput_per_s": self.throughput_per_s,
            "error": self.error,
        }
        if self.lower_bound_us is not None:
            out["lower_bound_us"] = self.lower_bound_us
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Result:
        """Inverse of :meth:`to_json`."""
        return cls(
            status=Status(obj["status"]),
            latency_us=obj.get("latency_us"),
            throughput_per_s=obj.get("throughput_per_s"),
            error=obj.get("error", ""),
            lower_bound_us=obj.get("lower_bound_us"),
            extra=_extra(obj, _RESULT_KEYS),
        )


@dataclass(frozen=True)
class Provenance:
    """Who measured what, when and where.

    Attributes:
        measurer: E.g. ``"sim"``.
        measurer_version: Version of the measurer (results of different versions differ).
        tuner: E.g. ``"optuna-tpe"``, ``"manual"``, ``"O2"``.
        study: Name of the tuning study.
        trial: Trial number within the study, if any.
        time_unix_s: When the measurement finished, seconds since the Unix epoch (UTC).
        host: Host that ran the measurement.
        params: The sampler's parameters of the candidate (Optuna trial params), since 1.1.
        cost_model: The cost model that ranked the candidate (name and training size),
            since 1.1; empty when none did.
        extra: Keys from a newer minor version.
    """

    measurer: str = ""
    measurer_version: str = ""
    tuner: str = ""
    study: str = ""
    trial: int | None = None
    time_unix_s: float = 0.0
    host: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)
    cost_model: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not math.isfinite(self.time_unix_s) or self.time_unix_s < 0:
            raise ValueError(f"time_unix_s must be finite and >= 0, got {self.time_unix_s!r}")
        object.__setattr__(self, "time_unix_s", float(self.time_unix_s))
        _check_extra(self.extra, _PROV_KEYS, "prov")

    @classmethod
    def now(cls, **fields: Any) -> Provenance:
        """A provenance stamped with the current time and this host's name."""
        fields.setdefault("time_unix_s", time.time())
        fields.setdefault("host", socket.gethostname())
        return cls(**fields)

    def to_json(self) -> dict[str, Any]:
        """The ``"prov"`` object of a record (the 1.1 keys only when set, so a 1.0
        record is written back exactly as it was read)."""
        out: dict[str, Any] = {
            "measurer": self.measurer,
            "measurer_version": self.measurer_version,
            "tuner": self.tuner,
            "study": self.study,
            "trial": self.trial,
            "time_unix_s": self.time_unix_s,
            "host": self.host,
        }
        if self.params:
            out["params"] = dict(self.params)
        if self.cost_model:
            out["cost_model"] = self.cost_model
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Provenance:
        """Inverse of :meth:`to_json`."""
        return cls(
            measurer=obj.get("measurer", ""),
            measurer_version=obj.get("measurer_version", ""),
            tuner=obj.get("tuner", ""),
            study=obj.get("study", ""),
            trial=obj.get("trial"),
            time_unix_s=obj["time_unix_s"],
            host=obj.get("host", ""),
            params=obj.get("params", {}),
            cost_model=obj.get("cost_model", ""),
            extra=_extra(obj, _PROV_KEYS),
        )


@dataclass(frozen=True)
class Record:
    """One measurement: a schedule of a workload on a target, its result and provenance.

    Records hold dicts (the schedule, extras), so they compare by value but are
    not hashable; use :attr:`index_key` to group them.

    Example:
        >>> rec = Record(WorkloadInfo("ab12", "resnet50", {"data": (8, 3, 224, 224)}, 8),
        ...              TargetKey("STCP920", "9f3c"), {"v": "1.0", "batch": 8},
        ...              Result(Status.OK, latency_us=917.3), Provenance.now(tuner="manual"))
        >>> Record.from_json(rec.to_json()) == rec
        True
    """

    workload: WorkloadInfo
    target: TargetKey
    schedule: Mapping[str, Any]
    result: Result
    prov: Provenance
    version: str = SCHEMA_VERSION
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.schedule, Mapping) or "v" not in self.schedule or (
            "batch" not in self.schedule
        ):
            raise ValueError("a schedule must be a JSON object with keys 'v' and 'batch'")
        _check_extra(self.extra, _RECORD_KEYS, "record")

    @property
    def workload_key(self) -> str:
        """Shortcut for ``workload.key``."""
        return self.workload.key

    @property
    def index_key(self) -> IndexKey:
        """``(workload_key, chip, hash)``."""
        return (self.workload.key, self.target.chip, self.target.hash)

    @property
    def is_valid(self) -> bool:
        """True when the measurement succeeded."""
        return self.result.is_valid

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object; ``schedule`` is the last key."""
        return {
            "v": self.version,
            "workload": self.workload.to_json(),
            "target": self.target.to_json(),
            "result": self.result.to_json(),
            "prov": self.prov.to_json(),
            **self.extra,
            "schedule": self.schedule,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Record:
        """Build a record from its JSON object, upgrading older versions.

        Raises:
            LogError: The object is not a record, or has a newer major version.
        """
        from logs._schema import check_record, upgrade

        upgraded = upgrade(obj)
        problem = check_record(upgraded)
        if problem:
            raise LogError(f"malformed record: {problem}")
        return cls._from_checked(upgraded)

    @classmethod
    def _from_checked(cls, obj: Mapping[str, Any]) -> Record:
        """Build from a current-layout object that already passed ``check_record``."""
        return cls(
            workload=WorkloadInfo.from_json(obj["workload"]),
            target=TargetKey.from_json(obj["target"]),
            schedule=obj["schedule"],
            result=Result.from_json(obj["result"]),
            prov=Provenance.from_json(obj["prov"]),
            version=obj["v"],
            extra=_extra(obj, _RECORD_KEYS),
        )

    def to_line(self) -> str:
        """The record as one log line, newline included (see :meth:`to_line_bytes`)."""
        return self.to_line_bytes().decode("utf-8")

    def to_line_bytes(self) -> bytes:
        """The record as one UTF-8 log line, newline included.

        The line is the record's JSON with ``schedule`` as the last key but
        one, followed by ``"crc32"``: the CRC-32 of the line's bytes before
        ``,"crc32":``. A reader that finds the CRC intact knows the line is
        whole and was checked when written, so it can decode only the part
        before the schedule; anything else is decoded and checked in full.
        A :class:`logs.ScheduleText` schedule's text is the line's schedule as
        it is (the same bytes ``json.dumps`` of its object writes).

        Raises:
            ValueError: The record would not be read back (e.g. ``batch`` < 1).
        """
        from logs._schema import check_record

        obj = self.to_json()
        sched: Any = obj["schedule"]
        # a ScheduleText is its line's text already (its 'v' and 'batch' checked by __post_init__)
        whole = type(sched) is not ScheduleText
        problem = check_record(obj, with_schedule=whole)
        if problem:
            raise ValueError(f"record cannot be written: {problem}")
        del obj["schedule"]
        sched = json.dumps(sched, **_LINE_JSON) if whole else sched.text
        head = json.dumps(obj, **_LINE_JSON)
        body = f'{head[:-1]},"schedule":{sched}'.encode()
        return b'%s,"crc32":%d}\n' % (body, zlib.crc32(body))

    def canonical(self) -> str:
        """Key-sorted JSON text: equal for equal records, used for ties and de-duplication."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          default=_plain)

    def rank_key(self) -> tuple[float, float, str]:
        """Sort key of valid records: latency, then earlier time, then the JSON text."""
        latency = self.result.latency_us if self.result.latency_us is not None else math.inf
        return (latency, self.prov.time_unix_s, self.canonical())


_LINE_JSON = LINE_JSON
_WORKLOAD_KEYS = frozenset({"key", "model", "input_shapes", "batch"})
_RESULT_KEYS = frozenset({"status", "latency_us", "throughput_per_s", "error", "lower_bound_us"})
_PROV_KEYS = frozenset(
    {"measurer", "measurer_version", "tuner", "study", "trial", "time_unix_s", "host", "params",
     "cost_model"}
)
# crc32 is a property of a line, not of the record: dropped on read.
_RECORD_KEYS = frozenset({"v", "workload", "target", "result", "prov", "schedule", "crc32"})


def _plain(obj: Any) -> Any:
    """``json.dumps``' ``default``: a schedule carried as its text, as its object."""
    if isinstance(obj, ScheduleText):
        return obj.parsed()
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def _extra(obj: Mapping[str, Any], known: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in known}


def _check_extra(extra: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    clash = sorted(extra.keys() & known)
    if clash:
        raise ValueError(f"{where} extra keys {clash} clash with known fields")

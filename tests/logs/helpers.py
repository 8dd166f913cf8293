"""Record factories shared by the logs and autotune tests."""

from __future__ import annotations

from typing import Any

from logs import Provenance, Record, Result, Status, TargetKey, WorkloadInfo

WKEY = "3f2a9c0e11d4b5a6"
WKEY2 = "77aa01bc9e3d0f12"
TARGET = TargetKey("STCP920", "a1b2c3d4e5f60718")
TARGET2 = TargetKey("STCP920", "0badc0de0badc0de")
T0 = 1_763_785_080.0


def schedule(batch: int = 8, tag: int = 0, pad: int = 0) -> dict[str, Any]:
    """A schedule-shaped JSON object (logs treats it as opaque)."""
    sched: dict[str, Any] = {
        "v": "1.0",
        "batch": batch,
        "groups": [{"ops": [0, 10 + tag], "split": 2, "scopes": ["L1", "LLB"]}],
        "order": [[0, 0], [0, 1]],
    }
    if pad:
        sched["pad"] = "x" * pad
    return sched


def make_record(
    latency_us: float | None = 1000.0,
    *,
    status: Status = Status.OK,
    key: str = WKEY,
    target: TargetKey = TARGET,
    time_s: float = T0,
    trial: int | None = 0,
    study: str = "study-a",
    tag: int = 0,
    batch: int = 8,
    model: str = "resnet50",
    error: str = "",
    pad: int = 0,
) -> Record:
    """One record; ``tag`` makes schedules differ."""
    if status is not Status.OK and not error:
        error = f"{status.value} in trial {trial}"
    return Record(
        workload=WorkloadInfo(key, model, {"data": (batch, 3, 224, 224)}, batch),
        target=target,
        schedule=schedule(batch, tag, pad),
        result=Result(
            status,
            latency_us=latency_us,
            throughput_per_s=batch / latency_us * 1e6 if latency_us else None,
            error=error,
        ),
        prov=Provenance("sim", "0.1.0", "optuna-tpe", study, trial, time_s, "node-1"),
    )


def write_lines(path: Any, records: list[Record]) -> None:
    """Write records with ``to_line`` (no RecordWriter)."""
    with open(path, "w", encoding="utf-8") as f:
        for record in records:
            f.write(record.to_line())

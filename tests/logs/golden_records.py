"""The records of ``data/v1_0_golden.jsonl``, spelled out (see test_golden.py)."""

from __future__ import annotations

import dataclasses

from logs import Provenance, Record, Result, Status, TargetKey, WorkloadInfo

_RESNET = WorkloadInfo("9c1d3e5f7a2b4c6d", "resnet50", {"data": (8, 3, 224, 224)}, 8)
_BERT = WorkloadInfo("0123456789abcdef", "bert-base", {"input_ids": (1, 128), "attention_mask": (1, 128)}, 1)
_UNICODE = WorkloadInfo("fedcba9876543210", "résnet-实验", {"图像": (2, 3, 32, 32)}, 2)
_T1 = TargetKey("STCP920", "5e884898da280471")
_T2 = TargetKey("STCP920", "1b4f0e9851971998")


def _sched(batch: int, split: int) -> dict[str, object]:
    return {
        "v": "1.0",
        "batch": batch,
        "groups": [
            {"ops": [0, 17], "split": split, "scopes": ["L1"] * split, "cores": [[0, 1], [2, 3]]},
            {"ops": [18, 52], "split": 1, "scopes": ["LLB"], "cores": [[0, 1, 2, 3]]},
        ],
        "order": [[0, c] for c in range(split)] + [[1, 0]],
    }


def _prov(trial: int | None, t: float, tuner: str = "optuna-tpe", host: str = "node-1") -> Provenance:
    return Provenance("sim", "0.1.0", tuner, "golden", trial, t, host)


GOLDEN = [
    Record(_RESNET, _T1, _sched(8, 2), Result(Status.OK, 917.3, 8721.33, ""), _prov(17, 1763785080.125)),
    Record(
        _RESNET,
        _T1,
        _sched(8, 4),
        Result(Status.CAPACITY, None, None, "L1 of core 3 overflows at step 7: needs 1.3 MiB, has 1 MiB"),
        _prov(18, 1763785081.5),
    ),
    Record(_RESNET, _T2, _sched(8, 2), Result(Status.OK, 1020.0, 7843.14), _prov(3, 1763785090.0)),
    Record(
        _BERT,
        _T1,
        _sched(1, 1),
        Result(Status.TIMEOUT, None, None, "simulation exceeded 60 s"),
        _prov(None, 1763785100.0, tuner="manual"),
    ),
    Record(
        _BERT,
        _T1,
        _sched(1, 2),
        Result(Status.INVALID_SCHEDULE, error="group 1 has two outputs"),
        _prov(4, 1763785101.0),
    ),
    Record(
        _BERT,
        _T1,
        _sched(1, 1),
        Result(Status.SIM_ERROR, error="no route from core 9"),
        _prov(5, 1763785102.0),
    ),
    Record(
        _BERT, _T1, _sched(1, 1), Result(Status.WORKER_LOST, error="ray worker died"), _prov(6, 1763785103.0)
    ),
    Record(_BERT, _T1, _sched(1, 1), Result(Status.OK, 85.25, 11730.2), _prov(7, 1763785104.0)),
    Record(
        _UNICODE, _T1, _sched(2, 2), Result(Status.OK, 12.0, 166666.7), _prov(0, 1763785110.0, host="节点-2")
    ),
]
# The file was written by graphtune 1.0; records built today default to the current minor.
GOLDEN = [dataclasses.replace(r, version="1.0") for r in GOLDEN]

"""A sweep's log as the sweep reads it: its simulator records of some tasks and variants.

(Out of :mod:`autotune.whatif._sweep`, so that :mod:`autotune.whatif._climb`, which the
sweep calls, reads the log as the sweep does without importing it.)
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autotune.job._tasks import Task
    from autotune.whatif._targets import Variant
    from logs import Record

__all__ = ["records", "sim_records"]


def sim_records(log_path: str, tasks: Sequence[Task], variants: Sequence[Variant]
                ) -> Iterator[Record]:
    """The log's records of these tasks on these variants by today's simulator, in log order."""
    from logs import LogWarning, read_records
    from sim import MEASURER, MEASURER_VERSION

    keys, wanted = {t.key for t in tasks}, {v.key for v in variants}
    if not os.path.exists(log_path) or not os.path.getsize(log_path):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LogWarning)
        for rec in read_records(log_path):
            if str(rec.target) not in wanted or rec.workload.key not in keys:
                continue
            if rec.prov.measurer != MEASURER or rec.prov.measurer_version != MEASURER_VERSION:
                continue
            yield rec


def records(log_path: str, tasks: Sequence[Task], variants: Sequence[Variant]
            ) -> dict[str, dict[str, list[Record]]]:
    """Target key -> workload key -> the log's simulator records of these tasks and variants."""
    out: dict[str, dict[str, list[Record]]] = {}
    for rec in sim_records(log_path, tasks, variants):
        out.setdefault(str(rec.target), {}).setdefault(rec.workload.key, []).append(rec)
    return out

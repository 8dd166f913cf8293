"""One Optuna study per task: names, sampler names, parameters, candidate identity, seeds.

A candidate's identity is its schedule's structural key (what it does, not
its labels): two trials that decode to the same schedule are one candidate,
measured once. Seeds are O0-O3 and every hand-written plan that fits the task;
they are enqueued first (``enqueue_trial`` with their projection into the
space) so the tuned result is never worse than any of them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from compiler.errors import GraphtuneError
from compiler.key_text import key_text

if TYPE_CHECKING:
    from optuna.distributions import CategoricalDistribution

    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule
    from compiler.target import Target
    from search_space import Space

__all__ = [
    "OBJECTIVES",
    "SAMPLERS",
    "candidate_id",
    "check_sampler",
    "distributions",
    "seed_schedules",
    "study_name",
    "tuner_label",
    "vector_of",
]

log = logging.getLogger("autotune.tune")

SAMPLERS = ("guided", "tpe", "gp", "nsga2", "random")
OBJECTIVES = ("latency", "throughput")


def check_sampler(name: str) -> None:
    """Raise a one-line error for an unknown sampler or one whose dependency is missing."""
    if name not in SAMPLERS:
        raise GraphtuneError(f"unknown sampler {name!r}: choose one of {', '.join(SAMPLERS)}")
    if name == "gp" and importlib.util.find_spec("torch") is None:
        raise GraphtuneError("the gp sampler needs PyTorch (Optuna's GPSampler): "
                             "pip install torch, or use --sampler guided|tpe|nsga2|random")


def tuner_label(sampler: str) -> str:
    """``prov.tuner`` of a record proposed by ``sampler``."""
    return "graphtune-guided" if sampler == "guided" else f"optuna-{sampler}"


def study_name(task_key: str, target: Target, objective: str) -> str:
    """The study of a task on a target for an objective (stable across runs)."""
    return f"graphtune-{task_key}-{target.hash}-{objective}"


def task_seed(seed: int | None, name: str) -> int | None:
    """A per-study seed derived from the job's seed (None stays None)."""
    if seed is None:
        return None
    return (seed * 1_000_003 + zlib.crc32(name.encode())) % (2**31 - 1)


def distributions(space: Space) -> dict[str, CategoricalDistribution]:
    """Every parameter of the space as an Optuna distribution (what ``suggest`` asks)."""
    from optuna.distributions import CategoricalDistribution

    return {d.name: CategoricalDistribution(list(d.choices)) for d in space.free}


def vector_of(space: Space, params: Mapping[str, Any]) -> np.ndarray | None:
    """The space's vector of a trial's parameters (None if one is unknown to the space).

    Parameters the trial did not ask are 0 (decoding does not read them).
    """
    index = _choice_index(space)
    vec = np.zeros(space.dimension, dtype=np.int16)
    for name, value in params.items():
        hit = index.get(name)
        if hit is None:
            return None
        f, choices = hit
        k = choices.get(value)
        if k is None:
            return None
        vec[f] = k
    return vec


_INDEX: dict[int, tuple[Any, dict[str, tuple[int, dict[Any, int]]]]] = {}


def _choice_index(space: Space) -> dict[str, tuple[int, dict[Any, int]]]:
    hit = _INDEX.get(id(space))
    if hit is not None and hit[0] is space:
        return hit[1]
    index = {d.name: (f, {v: k for k, v in enumerate(d.choices)}) for f, d in enumerate(space.free)}
    _INDEX[id(space)] = (space, index)
    return index


def candidate_id(schedule: GraphSchedule) -> str:
    """A short stable id of what a schedule does (its structural key).

    The sha256 of ``repr(schedule.structural_key())``, whose text a decoded schedule
    builds from its codes (:func:`compiler.key_text.key_text`: the same bytes, so ids
    in logs stay valid, at a fraction of the cost).
    """
    return hashlib.sha256(key_text(schedule).encode()).hexdigest()[:20]


def seed_schedules(graph: Graph, target: Target) -> list[tuple[str, GraphSchedule]]:
    """O0-O3 and every hand-written plan that fits ``graph``, as ``(label, schedule)``.

    A level that does not fit ``target`` even with every result demoted is left out.
    """
    from compiler.auto import graph_schedule_level
    from compiler.errors import ScheduleError
    from compiler.guide_plans import PLAN_BATCH, PLANS, guide_plan

    out: list[tuple[str, GraphSchedule]] = []
    for name in PLANS:
        if PLAN_BATCH[name] != graph.batch:
            continue
        try:
            out.append((f"plan:{name}", guide_plan(name, graph)))
        except Exception:  # noqa: BLE001 - a plan for another model fails in many ways
            continue
    for level in range(4):
        try:
            out.append((f"O{level}", graph_schedule_level(graph, target, level)))
        except ScheduleError as exc:  # a small target (a sweep's variant): the search may still fit
            log.info("O%d is not a seed: %s", level, exc)
    return out

"""Measured candidate sets for the cost-model bench, cached on disk (JSON lines, resumable).

For each network, from its search space (``search_space.build_space``): a *pool*
of candidates drawn with ``Space.sample`` (training sets and the uniform held-out
set come from it) and a *neighbourhood* set of ``Space.mutate`` moves (one to three)
from the best 5% of the pool, the schedules a tuner measures once it has found
good ones. A candidate is kept when it passes ``Space.precheck`` (the capacity
model) and runs (``sim.measure`` status ``ok``); each record holds the schedule,
its space vector and its measurement. Records carry a key of the space's
parameter names: a cache written by another version of the space is ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from compiler import zoo
from compiler.graph import Graph
from compiler.model import Model
from compiler.schedule import GraphSchedule
from compiler.target import Target
from search_space import Space, build_space

# bench name -> (zoo model, batch, zoo options)
NETWORKS: dict[str, tuple[str, int, dict[str, Any]]] = {
    "resnet50": ("resnet50", 16, {}),
    "bert_base": ("bert_base", 8, {"seq": 128}),
    "mobilenet_v2": ("mobilenet_v2", 16, {}),
    "deepfm": ("deepfm", 2560, {}),
    "resnet101": ("resnet101", 16, {}),
    "bert_large": ("bert_large", 8, {"seq": 128}),
}
LABELS = {
    "resnet50": "ResNet-50 b16", "bert_base": "BERT-base s128 b8", "mobilenet_v2": "MobileNetV2 b16",
    "deepfm": "DeepFM b2560", "resnet101": "ResNet-101 b16", "bert_large": "BERT-large s128 b8",
}


def load_graph(name: str) -> Graph:
    """The bench network's Graph (zoo model, weights as inputs: nothing big to build)."""
    model, batch, kw = NETWORKS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(zoo.build(model, batch=batch, weights="inputs", **kw), name=model).graph


@dataclass
class Sample:
    """One measured candidate."""

    schedule: GraphSchedule
    vector: np.ndarray  # its Space vector
    throughput: float
    kind: str  # "pool" | "nbhd"


def space_key(space: Space) -> str:
    """Identifies a space's parameters (a cache of another space version is not used)."""
    names = [f"{d.name}:{len(d.choices)}" for d in space.free]
    return hashlib.sha256(json.dumps(names).encode()).hexdigest()[:12]


def _key(s: GraphSchedule) -> str:
    d = s.to_json()
    d.pop("source", None)
    return json.dumps(d, sort_keys=True)


def read_records(path: Path, key: str) -> list[dict[str, Any]]:
    """Records of ``path`` written for the space ``key`` (a torn last line is skipped)."""
    recs: list[dict[str, Any]] = []
    if path.exists():
        with path.open() as f:
            for line in f:
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    break
                if r.get("space") == key:
                    recs.append(r)
    return recs


def measured_set(name: str, graph: Graph, target: Target, data_dir: Path, n_pool: int,
                 n_nbhd: int, seed: int = 0, log: Any = print) -> tuple[Space, list[Sample]]:
    """The space of ``name`` and its pool and neighbourhood, measuring what is missing.

    Records are appended to ``<data_dir>/<name>.jsonl`` one by one (flushed), so an
    interrupted run resumes where it stopped.
    """
    import sim

    space = build_space(graph, target)
    key = space_key(space)
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / f"{name}.jsonl"
    recs = read_records(path, key)
    seen = {_key(GraphSchedule.from_json(r["schedule"])) for r in recs}
    t0 = time.perf_counter()

    def count(kind: str) -> int:
        return sum(r["kind"] == kind for r in recs)

    def add(kind: str, s: GraphSchedule, f: Any) -> None:
        k = _key(s)
        if k in seen or not space.precheck(s).ok:
            return
        seen.add(k)
        m = sim.measure(graph, [s], target)[0]
        if not m.ok or not m.throughput_per_s:
            return
        rec = {"kind": kind, "space": key, "vector": space.encode(s).tolist(),
               "schedule": s.to_json(), "throughput_per_s": m.throughput_per_s,
               "latency_us": m.latency_us}
        recs.append(rec)
        f.write(json.dumps(rec) + "\n")
        f.flush()
        if count(kind) % 128 == 0:
            log(f"  {name}: {count(kind)} {kind} measured ({time.perf_counter() - t0:.0f} s)")

    with path.open("a") as f:
        rng = np.random.default_rng([seed, count("pool")])
        while count("pool") < n_pool:
            add("pool", space.sample(rng), f)
        pool = [r for r in recs if r["kind"] == "pool"][:n_pool]
        best = sorted(pool, key=lambda r: -r["throughput_per_s"])[:max(1, len(pool) // 20)]
        elites: list[GraphSchedule] = []
        rng = np.random.default_rng([seed, 1, count("nbhd")])
        while count("nbhd") < n_nbhd:
            if not elites:  # decoded here, so the space knows their vectors
                elites = [space.decode(np.array(r["vector"])) for r in best]
            s = elites[int(rng.integers(len(elites)))]
            for _ in range(int(rng.integers(1, 4))):
                s = space.mutate(s, rng)
            add("nbhd", s, f)
        os.fsync(f.fileno())
    out = []
    for kind, n in (("pool", n_pool), ("nbhd", n_nbhd)):
        rs = [r for r in recs if r["kind"] == kind][:n]
        out += [Sample(GraphSchedule.from_json(r["schedule"]), np.array(r["vector"], np.int16),
                       float(r["throughput_per_s"]), kind) for r in rs]
    return space, out

"""Measured candidate sets for the cost-model bench, cached on disk (JSON lines, resumable).

For each network: a *pool* of uniformly sampled candidates (training sets and the
uniform held-out set come from it) and a *neighbourhood* set: mutations (one to
three moves) of the best 5% of the pool, the schedules a tuner measures once it
has found good ones. Every record holds the schedule, how it was made and its
measurement by ``sim.measure``; only schedules that ran (status ``ok``) are kept.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench._candidates import Candidates, Genome
from compiler import zoo
from compiler.graph import Graph
from compiler.model import Model
from compiler.schedule import GraphSchedule
from compiler.target import Target

# bench name -> (zoo model, batch, zoo options)
NETWORKS: dict[str, tuple[str, int, dict[str, Any]]] = {
    "resnet50": ("resnet50", 16, {}),
    "bert_base": ("bert_base", 8, {"seq": 128}),
    "mobilenet_v2": ("mobilenet_v2", 16, {}),
    "deepfm": ("deepfm", 2560, {}),
    "resnet101": ("resnet101", 16, {}),
    "bert_large": ("bert_large", 8, {"seq": 128}),
    "tiny_cnn": ("tiny_cnn", 8, {}),
}
LABELS = {
    "resnet50": "ResNet-50 b16", "bert_base": "BERT-base s128 b8", "mobilenet_v2": "MobileNetV2 b16",
    "deepfm": "DeepFM b2560", "resnet101": "ResNet-101 b16", "bert_large": "BERT-large s128 b8",
    "tiny_cnn": "tiny CNN b8",
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
    throughput: float
    kind: str  # "pool" | "nbhd"


def _genome_json(g: Genome) -> dict[str, Any]:
    return asdict(g)


def _genome(d: dict[str, Any]) -> Genome:
    return Genome(tuple(d["bounds"]), tuple(d["splits"]), tuple(tuple(x) for x in d["scopes"]),
                  tuple(d["cores"]), tuple(d["parts"]), tuple(d["rot"]), d["order"])


def _key(s: GraphSchedule) -> str:
    d = s.to_json()
    d.pop("source", None)
    return json.dumps(d, sort_keys=True)


def measured_set(name: str, graph: Graph, target: Target, data_dir: Path, n_pool: int,
                 n_nbhd: int, seed: int = 0, log: Any = print) -> list[Sample]:
    """The pool and neighbourhood of ``name``, generating and measuring what is missing.

    Records are appended to ``<data_dir>/<name>.jsonl`` one by one (flushed), so an
    interrupted run resumes where it stopped.
    """
    import sim

    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / f"{name}.jsonl"
    recs: list[dict[str, Any]] = []
    if path.exists():
        with path.open() as f:
            for line in f:
                try:
                    recs.append(json.loads(line))
                except json.JSONDecodeError:
                    break  # a torn last line
    seen = {_key(GraphSchedule.from_json(r["schedule"])) for r in recs}
    cands = Candidates(graph, target)
    t0 = time.perf_counter()

    def add(kind: str, gen: Genome, s: GraphSchedule, f: Any) -> None:
        k = _key(s)
        if k in seen:
            return
        seen.add(k)
        m = sim.measure(graph, [s], target)[0]
        if not m.ok or not m.throughput_per_s:
            return
        rec = {"kind": kind, "genome": _genome_json(gen), "schedule": s.to_json(),
               "throughput_per_s": m.throughput_per_s, "latency_us": m.latency_us}
        recs.append(rec)
        f.write(json.dumps(rec) + "\n")
        f.flush()
        n = sum(r["kind"] == kind for r in recs)
        if n % 64 == 0:
            log(f"  {name}: {n} {kind} measured ({time.perf_counter() - t0:.0f} s)")

    with path.open("a") as f:
        pool = [r for r in recs if r["kind"] == "pool"]
        rng = np.random.default_rng([seed, len(pool)])
        while sum(r["kind"] == "pool" for r in recs) < n_pool:
            gen, s = cands.sample(rng)
            add("pool", gen, s, f)
        pool = [r for r in recs if r["kind"] == "pool"][:n_pool]
        best = sorted(pool, key=lambda r: -r["throughput_per_s"])[:max(1, len(pool) // 20)]
        nb = [r for r in recs if r["kind"] == "nbhd"]
        rng = np.random.default_rng([seed, 1, len(nb)])
        while sum(r["kind"] == "nbhd" for r in recs) < n_nbhd:
            gen = _genome(best[int(rng.integers(len(best)))]["genome"])
            for _ in range(int(rng.integers(0, 3))):
                gen = cands.mutate_genome(gen, rng)
            gen, s = cands.mutate(gen, rng)
            add("nbhd", gen, s, f)
        os.fsync(f.fileno())
    out = []
    for kind, n in (("pool", n_pool), ("nbhd", n_nbhd)):
        rs = [r for r in recs if r["kind"] == kind][:n]
        out += [Sample(GraphSchedule.from_json(r["schedule"]), float(r["throughput_per_s"]), kind)
                for r in rs]
    return out

"""The benchmark suite: baselines and searches per model, each a self-contained run.

A *run* is one (model, method) pair: a baseline set (O0-O3 and the guide's
plans that fit, simulated directly) or one search (``autotune.tune`` in this
process, ``workers=0``, seeded, so the measurement counts are reproducible).
Each run returns a plain dict and is saved as JSON under ``<out>/runs``; the
tables and plots are built from those files only (``bench/_suite_report.py``),
so every ratio in them comes from the same suite run.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._tuning import best_so_far

__all__ = ["EXTRA", "METHODS", "QUICK_BUDGET", "QUICK_MODELS", "SUITE", "ModelSpec", "run_baselines",
           "run_job", "run_search", "spec_of"]


@dataclass(frozen=True)
class ModelSpec:
    """One suite entry: a zoo model at a batch (and options)."""

    key: str
    zoo: str
    batch: int
    label: str
    options: dict[str, int] = field(default_factory=dict, hash=False)

    def graph(self) -> Any:
        """The model's graph (weights as graph inputs: nothing large is generated)."""
        from compiler import zoo
        from compiler.model import Model

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            onnx_model = zoo.build(self.zoo, batch=self.batch, weights="inputs", **self.options)
            return Model(onnx_model, name=self.key).graph


def _spec(key: str, zoo: str, batch: int, label: str, **options: int) -> ModelSpec:
    return ModelSpec(key, zoo, batch, label, options)


# The fixed suite of issue 13, in table order.
SUITE: dict[str, ModelSpec] = {s.key: s for s in (
    _spec("resnet50", "resnet50", 16, "ResNet-50 b16"),
    _spec("resnet101", "resnet101", 16, "ResNet-101 b16"),
    _spec("mobilenet_v2", "mobilenet_v2", 16, "MobileNetV2 b16"),
    _spec("bert_base_s128", "bert_base", 8, "BERT-base s128 b8", seq=128),
    _spec("bert_base_s384", "bert_base", 2, "BERT-base s384 b2", seq=384),
    _spec("bert_large_s128", "bert_large", 8, "BERT-large s128 b8", seq=128),
    _spec("deepfm", "deepfm", 2560, "DeepFM b2560"),
    _spec("wide_and_deep", "wide_and_deep", 2048, "Wide&Deep b2048"),
    _spec("vit", "vit", 16, "ViT-B/16 b16"),
    _spec("gpt", "gpt", 8, "GPT-2-small decoder s128 b8", seq=128),
)}

# Models outside the fixed suite that ``--models`` also accepts (tests, smoke runs).
EXTRA: dict[str, ModelSpec] = {
    "tiny_cnn": _spec("tiny_cnn", "tiny_cnn", 4, "tiny CNN b4"),
}

# Search methods: graphtune's guided search and Optuna's own samplers.
METHODS = ("guided", "tpe", "nsga2", "random")

# --quick: small models and a small budget (CI-sized).
QUICK_MODELS = ("deepfm", "wide_and_deep")
QUICK_BUDGET = 24


def spec_of(key: str) -> ModelSpec:
    """The spec of a suite or extra model."""
    return SUITE.get(key) or EXTRA[key]


def _target() -> Any:
    from compiler.target import Target

    return Target.default()


def _metrics(graph: Any, schedule: Any, target: Any) -> dict[str, Any]:
    """What the tables report about one schedule, from one simulation."""
    from sim import SimError, simulate

    r = simulate(graph, schedule, target, timeline=False)
    if isinstance(r, SimError):
        return {"status": r.status, "error": r.message}
    return {
        "status": "ok",
        "latency_us": r.latency_us,
        "chip_throughput_per_s": r.chip_throughput_per_s,
        "lower_bound_us": r.lower_bound_us,
        "latency_over_bound": r.latency_over_bound,
        "ddr_bytes": r.ddr_bytes,
        "peak_l1_bytes": r.peak_l1_bytes,
        "peak_llb_bytes": r.peak_llb_bytes,
    }


def _model_facts(spec: ModelSpec, graph: Any, target: Any) -> dict[str, Any]:
    from compiler.bound import compulsory_ddr_bytes

    return {"model": spec.key, "label": spec.label, "batch": spec.batch,
            "flops": float(graph.flops),
            "compulsory_ddr_bytes": compulsory_ddr_bytes(graph, spec.batch, target)}


def run_baselines(key: str) -> dict[str, Any]:
    """O0-O3 and every guide plan that fits, each simulated once."""
    from autotune.sampling._studies import seed_schedules

    spec = spec_of(key)
    target = _target()
    graph = spec.graph()
    t0, c0 = time.perf_counter(), time.process_time()
    rows = {label: _metrics(graph, s, target) for label, s in seed_schedules(graph, target)}
    return {**_model_facts(spec, graph, target), "method": "baselines", "baselines": rows,
            "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}


def run_search(key: str, method: str, budget: int, seed: int, seeded: bool,
               logs: Path) -> dict[str, Any]:
    """One search of ``budget`` measurements, from a fresh log in ``logs``.

    Returns the best-so-far curve (latency after each measurement), the best
    schedule's figures and the tuning wall time of this machine.
    """
    from autotune import tune
    from compiler.schedule import GraphSchedule

    spec = spec_of(key)
    target = _target()
    graph = spec.graph()
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{key}_{method}.jsonl"
    for stale in (log, log.with_suffix(".journal")):
        if stale.exists():
            os.unlink(stale)
    t0, c0 = time.perf_counter(), time.process_time()
    res = tune([graph], trials=budget, workers=0, log=log, sampler=method, seed=seed,
               curve=False, seeds=seeded)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if len(res.tasks) != 1:
        raise RuntimeError(f"{key}: {len(res.tasks)} tasks; the suite expects models that run "
                           "whole on the NPU (one task)")
    (task,) = res.tasks
    curve = best_so_far(log)
    best = (_metrics(graph, GraphSchedule.from_json(task.best_schedule), target)
            if task.best_schedule else {"status": "none", "error": "no valid schedule"})
    return {**_model_facts(spec, graph, target), "method": method, "budget": budget,
            "seed": seed, "seeded": seeded, "measurements": len(curve), "curve": curve,
            "errors": sum(task.errors.values()), "best_tuner": task.best_tuner,
            "stopped": task.stopped,
            "best": best, "wall_s": wall, "cpu_s": cpu}


def run_job(job: tuple[Any, ...], runs: Path) -> dict[str, Any]:
    """Run one job (``("baselines", key)`` or ``("search", key, method, ...)``) and save it."""
    from compiler.files import write_atomic

    if job[0] == "baselines":
        out = run_baselines(job[1])
        name = f"{job[1]}_baselines.json"
    else:
        _, key, method, budget, seed, seeded, logs = job
        out = run_search(key, method, budget, seed, seeded, Path(logs))
        name = f"{key}_{method}.json"
    out["finished_utc"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    out["load_1min"] = os.getloadavg()[0]
    runs.mkdir(parents=True, exist_ok=True)
    write_atomic(runs / name, json.dumps(out, indent=1).encode())
    return out


def die_with_parent() -> None:
    """In a pool worker: end with the suite's process, even when it is SIGKILLed (Linux).

    A module function (not in ``bench/__main__.py``): spawned workers import it by name.
    """
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

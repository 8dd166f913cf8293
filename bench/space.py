"""Search-space acceptance figures (issue 9): projections, round trips, validity, speed, search.

Usage: PYTHONPATH=. python bench/space.py [--models a,b] [--samples N] [--valid M] [--search K]
       PYTHONPATH=. python bench/space.py --compare-only [--count N] [--id]
           (compiled vs Python only; --id: with each candidate's candidate_id)

Per model (zoo, weights as inputs): whether O0-O3 and the guide's plan project
exactly; the time of sample + decode + precheck per candidate (CPU and wall
clock: the first 20 candidates of a fresh space, then 200 after a warm-up, with
steps per candidate); decode(encode(s)) == s over N random samples (encode
through the projection path: the schedule is copied first); the fraction of M
samples the simulator accepts (``Space.sample``, and fully uniform vectors), and
whether precheck agrees on each (verdict and reason); a random search of K
simulator evaluations (best vs O3 and the guide plan: ratios > 1 mean the search
found faster); encode of 10,000 decoded schedules into one array.

``compiled_vs_python`` (issue 20): sample + decode + precheck per candidate, CPU time,
with the compiled scope walk and with ``GRAPHTUNE_PURE_PYTHON=1``, in one process on
two spaces of the same graph that draw the same vectors: both warmed up alike, then
timed in alternating blocks of 20 so load changes hit both; the ratio is Python / compiled.
With ``--compare-only``, after every model's clocks, ``kept_objects`` (per decoder: tracked
objects a pre-checked candidate keeps alive, what the garbage collector walks for it) and
``cache_objects`` (objects the space's caches grew by per candidate), over 50 candidates
of fresh spaces warmed alike (:func:`kept_figures`).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import numpy as np

from compiler import zoo
from compiler.auto import graph_schedule_level
from compiler.memo import search_gc
from compiler.model import Model
from compiler.schedule import GraphSchedule
from compiler.target import Target
from search_space import build_space
from sim import SimError, simulate

MODELS = {
    "resnet50": (16, {}), "resnet101": (16, {}), "mobilenet_v2": (16, {}),
    "bert_base": (8, {"seq": 128}), "bert_large": (8, {"seq": 128}),
    "deepfm": (2560, {}), "wide_and_deep": (2048, {}), "dlrm": (2048, {}),
}


def _graph(name: str):  # noqa: ANN202
    batch, kw = MODELS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(zoo.build(name, batch=batch, weights="inputs", **kw), name=name).graph


def _guide(name: str, g) -> GraphSchedule | None:  # noqa: ANN001
    from compiler import guide_plans

    plan = {"resnet50": "resnet50", "bert_base": "bert_base", "deepfm": "deepfm"}.get(name)
    return guide_plans.guide_plan(plan, g) if plan else None


def _copy(s: GraphSchedule) -> GraphSchedule:
    return GraphSchedule.from_json(json.loads(s.dumps()))


def _timed_candidates(space, rng, count: int,  # noqa: ANN001
                      ident: bool = False) -> tuple[float, float, float]:
    """(CPU ms, wall ms, steps) per sample + decode + precheck (+ ``candidate_id`` with
    ``ident``), mean over ``count``. The steps are counted after the clocks stop: reading
    ``s.order`` builds a decoded schedule's objects, which a pre-checked candidate never
    needs (``search_space._lazy``)."""
    from autotune.sampling._studies import candidate_id

    cpu, wall = time.process_time(), time.perf_counter()
    done = []
    for _ in range(count):
        s = space.sample(rng)
        if ident:
            candidate_id(s)
        space.precheck(s)
        done.append(s)
    n = max(count, 1)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    steps = sum(len(s.order) for s in done)
    return 1e3 * cpu / n, 1e3 * wall / n, steps / n


def kept_objects(space, rng, count: int = 50) -> tuple[float, float]:  # noqa: ANN001
    """(tracked objects a pre-checked candidate keeps alive, objects the space's caches grew
    by) per candidate: ``count`` candidates sampled and pre-checked, held in a list as
    :func:`_timed_candidates` holds them, the young objects counted after a full collection
    (everything alive before is frozen first), then again once they are dropped. What a
    generation-0 collection walks per candidate (issue 20); no clock: the same for the same
    space state and vectors."""
    import gc

    gc.collect()
    gc.freeze()
    try:
        done = []
        for _ in range(count):
            s = space.sample(rng)
            space.precheck(s)
            done.append(s)
        del s
        gc.collect()
        held = len(gc.get_objects())
        del done
        gc.collect()
        cached = len(gc.get_objects())
    finally:
        gc.unfreeze()
    n = max(count, 1)
    return round((held - cached) / n, 1), round(cached / n, 1)


def compare(name: str, warm: int, count: int, target: Target,
            ident: bool = False) -> dict[str, object]:
    """Compiled vs Python decoder, per candidate (see the module doc); with ``ident`` each
    candidate's ``candidate_id`` is timed too (what a tune asks of every candidate)."""
    from search_space import _ccore

    g = _graph(name)
    spaces = {"c": build_space(g, target), "py": build_space(g, target)}
    rngs = {k: np.random.default_rng(1) for k in spaces}
    cpu = {"c": 0.0, "py": 0.0}
    steps = {"c": 0.0, "py": 0.0}

    def block(k: str, n: int, timed: bool) -> None:
        if k == "py":
            os.environ["GRAPHTUNE_PURE_PYTHON"] = "1"
        try:
            ms, _, st = _timed_candidates(spaces[k], rngs[k], n, ident)
        finally:
            os.environ.pop("GRAPHTUNE_PURE_PYTHON", None)
        if timed:
            cpu[k] += ms * n
            steps[k] += st * n

    with search_gc():
        for k in spaces:
            block(k, warm, False)
        done = 0
        while done < count:
            n = min(20, count - done)
            for k in spaces:
                block(k, n, True)
            done += n
    c, py = cpu["c"] / count, cpu["py"] / count
    return {"model": name, "compiled_vs_python": {
        "compiled_available": _ccore.available(), "c_cpu_ms": round(c, 3), "py_cpu_ms": round(py, 3),
        "ratio": round(py / c, 2) if c else None, "steps": round(steps["c"] / count, 1),
        "candidates": count, "warm": warm, "with_id": ident, "load": [round(x, 2) for x in os.getloadavg()]}}


def kept_figures(name: str, warm: int, target: Target) -> dict[str, dict[str, float]]:
    """``kept_objects`` and ``cache_objects`` per decoder (:func:`kept_objects`, 50 candidates)
    on fresh spaces warmed like :func:`compare`'s. Run after every model's timing: it
    collects, freezes and unfreezes the whole heap, which changed the next model's
    timing in the same process (BERT-large after ResNet-50: 2.6-2.7 instead of 2.3 ms)."""
    g = _graph(name)
    kept = {}
    for k in ("c", "py"):
        if k == "py":
            os.environ["GRAPHTUNE_PURE_PYTHON"] = "1"
        try:
            space, rng = build_space(g, target), np.random.default_rng(1)
            with search_gc():
                _timed_candidates(space, rng, warm)
            kept[k] = kept_objects(space, rng, 50)
        finally:
            os.environ.pop("GRAPHTUNE_PURE_PYTHON", None)
    return {"kept_objects": {k: v[0] for k, v in kept.items()},
            "cache_objects": {k: v[1] for k, v in kept.items()}}


def run(name: str, n_rt: int, n_valid: int, n_search: int, warm: int,
        target: Target) -> dict[str, object]:
    g = _graph(name)
    t = time.perf_counter()
    space = build_space(g, target)
    out: dict[str, object] = {"model": name, "build_s": round(time.perf_counter() - t, 2),
                              "dimension": space.dimension, "log10_size": round(space.size(), 1),
                              "log10_size_tied": round(space.size(True), 1)}
    seeds = {f"O{k}": graph_schedule_level(g, target, k) for k in range(4)}
    guide = _guide(name, g)
    if guide is not None:
        seeds["guide"] = guide
    proj = {}
    for k, s in seeds.items():
        p = space.project(_copy(s))
        ok = p.schedule is not None and space.decode(space.encode(_copy(s))).structural_key() \
            == s.structural_key()
        proj[k] = "exact" if ok else p.reason
    out["projection"] = proj
    rng = np.random.default_rng(0)
    # speed: cold (first candidates of a fresh space), then steady state after a warm-up,
    # with the garbage collector set as a tuning job sets it (compiler.memo.search_gc)
    with search_gc():
        cold = _timed_candidates(space, rng, 20)
        _timed_candidates(space, rng, warm)
        hot = _timed_candidates(space, rng, 200)
    out["ms_per_candidate"] = {"cold_cpu": round(cold[0], 2), "cpu": round(hot[0], 2),
                               "wall": round(hot[1], 2), "steps": round(hot[2], 1),
                               "us_per_step_cpu": round(1e3 * hot[0] / max(hot[2], 1), 1)}
    rt = 0
    for _ in range(n_rt):
        s = space.sample(rng)
        try:
            rt += space.decode(space.encode(_copy(s))).structural_key() == s.structural_key()
        except Exception:  # noqa: BLE001 - counted as a failure
            pass
    out["round_trip"] = f"{rt}/{n_rt}"
    for label, uniform in (("valid", False), ("valid_uniform", True)):
        valid = agree = 0
        for _ in range(n_valid):
            s = space.sample(rng, uniform=uniform)
            check = space.precheck(s)
            r = simulate(g, s, target, timeline=False)
            ok = not isinstance(r, SimError)
            valid += ok
            agree += check.ok == ok and (ok or check.reason == r.message)
        out[label] = f"{valid}/{n_valid}"
        out[f"precheck_agrees{label[5:]}"] = f"{agree}/{n_valid}"
    best = None
    n_ok = 0
    for _ in range(n_search):
        r = simulate(g, space.sample(rng), target, timeline=False)
        if not isinstance(r, SimError):
            n_ok += 1
            best = r.latency_us if best is None else min(best, r.latency_us)
    o3 = simulate(g, seeds["O3"], target, timeline=False)
    search: dict[str, object] = {"evals": n_search, "valid": n_ok, "best_us": _r(best),
                                 "O3_us": _r(getattr(o3, "latency_us", None))}
    if best is not None and not isinstance(o3, SimError):
        search["best_vs_O3"] = round(o3.latency_us / best, 3)
    if guide is not None:
        gr = simulate(g, guide, target, timeline=False)
        search["guide_us"] = _r(getattr(gr, "latency_us", None))
        if best is not None and not isinstance(gr, SimError):
            search["best_vs_guide"] = round(gr.latency_us / best, 3)
    out["search"] = search
    ss = [space.sample(rng) for _ in range(200)]
    t = time.process_time()
    m = space.encode_many(ss * 50)
    out["encode_10k_cpu_s"] = round(time.process_time() - t, 3)
    out["encode_shape"] = list(m.shape)
    return out


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--valid", type=int, default=200)
    ap.add_argument("--search", type=int, default=500)
    ap.add_argument("--warm", type=int, default=200, help="samples before the timed ones")
    ap.add_argument("--count", type=int, default=200, help="timed candidates, compiled vs Python")
    ap.add_argument("--compare-only", action="store_true",
                    help="only the compiled vs Python decoder figures")
    ap.add_argument("--id", action="store_true",
                    help="time each candidate's candidate_id too (compiled vs Python figures)")
    a = ap.parse_args()
    target = Target.default()
    timed = []
    for name in a.models.split(","):
        timed.append(compare(name, a.warm, a.count, target, a.id))
        if not a.compare_only:
            print(json.dumps(timed[-1]), flush=True)
            print(json.dumps(run(name, a.samples, a.valid, a.search, a.warm, target)), flush=True)
    if a.compare_only:  # the object counts after every clock (kept_figures)
        for out in timed:
            out["compiled_vs_python"].update(kept_figures(out["model"], a.warm, target))  # type: ignore[union-attr]
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()

"""Search-space acceptance figures (issue 9): projections, round trips, validity, speed, search.

Usage: PYTHONPATH=. python bench/space.py [--models a,b] [--samples N] [--valid M] [--search K]

Per model (zoo, weights as inputs): whether O0-O3 and the guide's plan project
exactly; decode(encode(s)) == s over N random samples (encode through the
projection path: the schedule is copied first); the fraction of M uniform
samples the simulator accepts, and whether precheck agrees on each; a random
search of K simulator evaluations (best vs O3 and the guide plan); the time of
sample + decode + precheck per candidate; vectorised encode of many samples.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

from compiler import zoo
from compiler.auto import graph_schedule_level
from compiler.model import Model
from compiler.schedule import GraphSchedule
from compiler.target import Target
from search_space import build_space
from sim import SimError, simulate

MODELS = {
    "resnet50": (16, {}), "resnet101": (16, {}), "mobilenet_v2": (16, {}),
    "bert_base": (8, {"seq": 128}), "bert_large": (8, {"seq": 128}),
    "deepfm": (2560, {}), "wide_and_deep": (2048, {}),
}


def _graph(name: str):  # noqa: ANN202
    batch, kw = MODELS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(zoo.build(name, batch=batch, weights="inputs", **kw), name=name).graph


def _guide(name: str, g) -> GraphSchedule | None:  # noqa: ANN001
    from compiler import schedules

    plan = {"resnet50": "resnet50", "bert_base": "bert_base", "deepfm": "deepfm"}.get(name)
    return schedules.plan(plan, g) if plan else None


def _copy(s: GraphSchedule) -> GraphSchedule:
    return GraphSchedule.from_json(json.loads(s.dumps()))


def run(name: str, n_rt: int, n_valid: int, n_search: int, target: Target) -> dict[str, object]:
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
    rt = 0
    for _ in range(n_rt):
        s = space.sample(rng)
        try:
            rt += space.decode(space.encode(_copy(s))).structural_key() == s.structural_key()
        except Exception:  # noqa: BLE001 - counted as a failure
            pass
    out["round_trip"] = f"{rt}/{n_rt}"
    valid = agree = 0
    t_cand = 0.0
    for _ in range(n_valid):
        t = time.perf_counter()
        s = space.sample(rng)
        check = space.precheck(s)
        t_cand += time.perf_counter() - t
        r = simulate(g, s, target, timeline=False)
        ok = not isinstance(r, SimError)
        valid += ok
        agree += check.ok == ok
    out["valid"] = f"{valid}/{n_valid}"
    out["precheck_agrees"] = f"{agree}/{n_valid}"
    out["ms_sample_decode_precheck"] = round(1e3 * t_cand / max(n_valid, 1), 2)
    best = None
    n_ok = 0
    for _ in range(n_search):
        r = simulate(g, space.sample(rng), target, timeline=False)
        if not isinstance(r, SimError):
            n_ok += 1
            best = r.latency_us if best is None else min(best, r.latency_us)
    o3 = simulate(g, seeds["O3"], target, timeline=False)
    out["search"] = {"evals": n_search, "valid": n_ok, "best_us": best,
                     "O3_us": getattr(o3, "latency_us", None)}
    if guide is not None:
        out["search"]["guide_us"] = getattr(simulate(g, guide, target, timeline=False),  # type: ignore[index]
                                            "latency_us", None)
    ss = [space.sample(rng) for _ in range(200)]
    t = time.perf_counter()
    m = space.encode_many(ss * 50)
    out["encode_10k_s"] = round(time.perf_counter() - t, 3)
    out["encode_shape"] = list(m.shape)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--valid", type=int, default=200)
    ap.add_argument("--search", type=int, default=500)
    a = ap.parse_args()
    target = Target.default()
    for name in a.models.split(","):
        print(json.dumps(run(name, a.samples, a.valid, a.search, target)), flush=True)


if __name__ == "__main__":
    main()

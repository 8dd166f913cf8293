"""The sweep's last miss, offline: what moves from its best reach the cold tune's bar.

ResNet-50 b16, seed 0, L1 384K / DDR 27 (``bench/results/sweep.md``, twenty-fifth pass): the
sweep's best 9,518.2 us, the bar 0.99 x the cold 400-trial best 9,341.4 (9,435.8 us). Every
candidate here is *simulated* (``sim.measure``), so each count is of simulations, an upper
bound of what a model-ranked search spending measurements can reach, not a budget it has.

From the best (``--log``, ``--line``: the sweep's JSON-lines log and the best's line):

1. **re-shaped**: every group's samples per part, cores per part and core parts set to one
   choice at once (5 x 4 x 4), in depth-first and breadth-first order (the granularity
   parameter decides only which cut points are boundaries, so a re-granulation that keeps
   the groups is this); each distinct latency of the fastest ``--starts``, then climbed by
   steepest descent over the polish's one-move ring (``neighbour_vectors``);
2. **descent**: the same climb from the best itself;
3. **pair**: the regroupings (``_regroup.regroup_vectors``) that move the boundary at
   ``--moved`` (ops) to ``--to``, each followed by every regrouping of the groups from
   ``--after`` on; the fastest pair then climbed as in 1;
4. **rank**: where an XGBoost model fitted on the variant's own records in the log up to
   ``--line`` (as a later chunk's model is, roughly) ranks the best's faster one-move
   neighbours (a chunk's polish proposes the model's first 6 of them; ``tune``'s 48).

Writes ``--out`` (JSON: every figure, and the parameters of each end point).

    PYTHONPATH=. .venv/bin/python bench/sweep_miss.py --log /tmp/h122/runs/r50s0/resnet50/sweep.jsonl \\
        --line 944 --out bench/results/sweep/r50_twentyfifth_pass_offline.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BAR = 9341.427555555554 / 0.99  # the bar: 0.99 of the cold best's speed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log", required=True)
    ap.add_argument("--line", type=int, required=True, help="the best's line (1-based)")
    ap.add_argument("--variant", default="l1.data_bytes=384K;ddr.bytes_per_cycle=27")
    ap.add_argument("--starts", type=int, default=24)
    ap.add_argument("--moved", type=int, default=151)
    ap.add_argument("--to", type=int, default=152)
    ap.add_argument("--after", type=int, default=99)
    ap.add_argument("--pairs", type=int, default=6, help="first moves (fastest) tried")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    from autotune._tune import load_tasks
    from autotune.whatif._regroup import regroup_vectors
    from autotune.whatif._targets import make_variants, parse_set
    from bench.sweep import graph_of
    from compiler.schedule import GraphSchedule
    from compiler.target import Target
    from cost_model import XGBModel, features
    from search_space import build_space
    from search_space._neighbours import neighbour_vectors, vector_view
    from sim import measure

    task = load_tasks([graph_of("resnet50", 16, {})])[0]
    variant = make_variants(Target.default(), [parse_set(s) for s in a.variant.split(";")])[0]
    space = build_space(task.graph, variant.target, task.batch)
    records = [json.loads(line) for line in Path(a.log).read_text().splitlines()[:a.line]]
    best = records[-1]
    sims = 0

    def lat(vecs: list[np.ndarray]) -> list[float]:
        nonlocal sims
        sims += len(vecs)
        ms = measure(task.graph, [space.decode(w) for w in vecs], variant.target)
        return [m.latency_us if m.ok else float("inf") for m in ms]

    def params(vec: np.ndarray) -> dict[str, Any]:
        return {d.name: d.choices[int(vec[f])] for f, d in enumerate(space.free)}

    def climb(x: np.ndarray, y: float) -> tuple[np.ndarray, float, list[tuple[float, str]]]:
        steps = []
        while True:
            hood = neighbour_vectors(space, space.decode(x))
            got = lat([w for _, w in hood])
            j = int(np.argmin(got))
            if got[j] >= y - 1e-6:
                return x, y, steps
            x, y = hood[j][1], got[j]
            steps.append((round(y, 1), hood[j][0]))

    base = vector_view(space, space.project(GraphSchedule.from_json(best["schedule"])).schedule)[0]
    y0 = lat([base])[0]
    out: dict[str, Any] = {"log": a.log, "line": a.line, "variant": variant.name, "best_us": y0,
                           "bar_us": BAR}
    t0 = time.time()
    kinds: dict[str, list[int]] = {}
    for f, d in enumerate(space.free):
        kinds.setdefault(d.kind, []).append(f)
    cands, tags = [], []
    for o, s, c, p in itertools.product(range(2), range(5), range(4), range(4)):
        w = base.copy()
        w[kinds["samples"]], w[kinds["cpp"]], w[kinds["parts"]], w[kinds["order"][0]] = s, c, p, o
        cands.append(w)
        tags.append(("depth", "breadth")[o] + f" samples#{s} cpp#{c} parts#{p}")
    got = lat(cands)
    seen: set[float] = set()
    starts = []
    for i in np.argsort(got):
        if np.isfinite(got[i]) and round(got[i], 3) not in seen:
            seen.add(round(got[i], 3))
            starts.append(int(i))
    reshaped = []
    for i in starts[:a.starts]:
        _, y, steps = climb(cands[i], got[i])
        reshaped.append({"start": tags[i], "start_us": got[i], "climbed_us": y, "steps": len(steps)})
        print(f"re-shaped {tags[i]}: {got[i]:.1f} -> {y:.1f}", flush=True)
    out["reshaped"] = {"distinct": len(starts), "fastest_depth_us": min(
        g for g, t in zip(got, tags) if t.startswith("depth")), "fastest_breadth_us": min(
        g for g, t in zip(got, tags) if t.startswith("breadth")), "climbed": reshaped}
    x, y, steps = climb(base, y0)
    out["descent"] = {"end_us": y, "steps": steps, "params": params(x)}
    print(f"descent from the best: {y0:.1f} -> {y:.1f} {steps}", flush=True)

    first = [(mv, w) for mv, w in regroup_vectors(space, base, len(task.graph.ops))
             if mv[2] == a.to and mv[0] in ("recut", "cut")]
    got1 = lat([w for _, w in first])
    pair: tuple[float, Any, np.ndarray] = (float("inf"), None, base)
    tried = []
    for i in np.argsort(got1)[:a.pairs]:
        second = [(mv, w) for mv, w in regroup_vectors(space, first[i][1], len(task.graph.ops))
                  if mv[1] >= a.after]
        got2 = lat([w for _, w in second])
        j = int(np.argmin(got2))
        tried.append({"first": list(first[i][0]), "first_us": got1[i], "best_second": list(second[j][0]),
                      "second_us": got2[j], "second_moves": len(second),
                      "under_bar": sum(1 for g in got2 if g < BAR)})
        if got2[j] < pair[0]:
            pair = (got2[j], (first[i][0], second[j][0]), second[j][1])
    x, y, steps = climb(pair[2], pair[0])
    out["pair"] = {"first_moves": len(first), "tried": tried, "pair_us": pair[0], "climbed_us": y,
                   "steps": steps, "under_bar": y < BAR, "params": params(x)}
    print(f"pair {pair[1]}: {pair[0]:.1f}, climbed {y:.1f} {steps}", flush=True)

    own = [r for r in records if r["target"]["chip"] == best["target"]["chip"]
           and r["result"]["status"] == "ok"]
    model = XGBModel()
    model.fit(features(task.graph, [GraphSchedule.from_json(r["schedule"]) for r in own], variant.target),
              np.array([1e6 * task.batch / r["result"]["latency_us"] for r in own]))
    hood = neighbour_vectors(space, space.decode(base))
    got = lat([w for _, w in hood])
    score = model.predict(features(task.graph, [space.decode(w) for _, w in hood], variant.target))
    rank = np.empty(len(score), dtype=int)
    rank[np.argsort(-score, kind="stable")] = np.arange(len(score))
    out["rank"] = {"records": len(own), "neighbours": len(hood), "faster": sorted(
        (round(g, 1), hood[k][0], int(rank[k])) for k, g in enumerate(got) if g < y0 - 1e-6)}
    print(f"model ranks of the faster neighbours: {out['rank']['faster']}", flush=True)
    out["simulations"], out["seconds"] = sims, round(time.time() - t0, 1)
    Path(a.out).write_text(json.dumps(out, indent=1, default=float) + "\n")


if __name__ == "__main__":
    main()

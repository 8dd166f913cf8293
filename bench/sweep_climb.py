"""The sweep's last miss, offline: what a scope climb (``autotune.whatif._climb``) spends from it.

ResNet-50 b16, seed 0, L1 384K / DDR 27 (``bench/results/sweep.md``, twenty-sixth pass): the
sweep's best 9,518.2 us, the bar 9,341.4 / 0.99 = 9,435.8 us. Each start is climbed by
:func:`autotune.whatif._climb.scope_climb` as the sweep would (its scope moves, those of the
ops where it differs from the old best first, then an XGBoost's order fitted on the variant's
records of ``--log`` up to ``--fit``), every candidate *simulated* (``sim.measure``), so a count
is of simulations the climb would spend as measurements. The starts:

* ``--lines``: records of ``--log`` (comma-separated lines, climbed in that order, one budget);
* ``pair``: the pair of regroupings of the best at ``--line`` (boundary 151 -> 152, a cut at
  158) the simulator puts first (9,456.0 us), alone.

    PYTHONPATH=. .venv/bin/python bench/sweep_climb.py \\
        --log /tmp/h133/replay/pairs1/resnet50/sweep.jsonl --line 944 --fit 1250 \\
        --out bench/results/sweep/r50_twentysixth_pass_offline.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BAR = 9341.427555555554 / 0.99  # the bar: 0.99 of the cold best's speed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log", required=True)
    ap.add_argument("--line", type=int, default=944, help="the old best's line (1-based)")
    ap.add_argument("--fit", type=int, default=1250, help="the model's records: lines up to this")
    ap.add_argument("--variant", default="l1.data_bytes=384K;ddr.bytes_per_cycle=27")
    ap.add_argument("--budgets", default="20,40,60")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    from autotune._tune import load_tasks
    from autotune.whatif._climb import BLOCK, PER_STEP, scope_climb
    from autotune.whatif._regroup import pair_vectors
    from autotune.whatif._targets import make_variants, parse_set
    from bench.sweep import graph_of
    from compiler.schedule import GraphSchedule
    from compiler.target import Target
    from cost_model import XGBModel, features
    from search_space import build_space
    from sim import measure

    task = load_tasks([graph_of("resnet50", 16, {})])[0]
    variant = make_variants(Target.default(), [parse_set(s) for s in a.variant.split(";")])[0]
    space = build_space(task.graph, variant.target, task.batch)
    records = [json.loads(line) for line in Path(a.log).read_text().splitlines()]
    chip = records[a.line - 1]["target"]["chip"]

    def vec(line: int) -> np.ndarray:
        return space.encode(space.project(GraphSchedule.from_json(records[line - 1]["schedule"])).schedule)

    def lat(vecs: list[np.ndarray]) -> list[float]:
        ms = measure(task.graph, [space.decode(w) for w in vecs], variant.target)
        return [m.latency_us if m.ok else float("inf") for m in ms]

    own = [r for r in records[:a.fit] if r["target"]["chip"] == chip and r["result"]["status"] == "ok"]
    model = XGBModel()
    model.fit(features(task.graph, [GraphSchedule.from_json(r["schedule"]) for r in own], variant.target),
              np.array([1e6 * task.batch / r["result"]["latency_us"] for r in own]))

    def score(ws: list[np.ndarray]) -> np.ndarray:
        return np.asarray(model.predict(features(task.graph, [space.decode(w) for w in ws], variant.target)))

    old = vec(a.line)
    pair = min((w for mv, w in pair_vectors(space, old, len(task.graph.ops)) if mv == ("pair", 152, 158)),
               key=lambda w: lat([w])[0])
    starts = {"chunk's new bests, fastest first (lines 1270, 1266)": [1270, 1266],
              "the measured pair alone (line 1266)": [1266], "the old best (line 944)": [944]}
    out: dict[str, Any] = {"log": a.log, "line": a.line, "fit_records": len(own), "bar_us": BAR,
                           "block": BLOCK, "per_step": PER_STEP, "climbs": []}
    for budget in (int(b) for b in a.budgets.split(",")):
        for name, lines in [*starts.items(), ("the pair 9,456.0 (offline)", None)]:
            begin = ([(vec(n), float(records[n - 1]["result"]["latency_us"])) for n in lines]
                     if lines else [(pair, lat([pair])[0])])
            trace: list[float] = []

            def measured(ws: list[np.ndarray], trace: list[float] = trace) -> list[float]:
                got = lat(ws)
                trace.extend(got)
                return got

            _, y, spent = scope_climb(space, begin, old, score, measured, budget)
            first = next((i + 1 for i, g in enumerate(trace) if g < BAR), None)
            out["climbs"].append({"starts": name, "start_us": [s[1] for s in begin], "budget": budget,
                                  "end_us": y, "spent": spent, "under_bar": y < BAR,
                                  "first_under_bar_at": first})
            print(f"budget {budget}, {name}: {y:.1f} us, {spent} spent, under the bar at {first}",
                  flush=True)
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()

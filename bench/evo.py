"""A plain (mu + lambda) evolutionary search over the space's vectors: the baseline the tuner must beat.

No cost model, no guidance: a population of ``mu`` vectors of
``search_space.Space`` (one choice index per free parameter), each generation
``lambda`` children, each from two parents picked by binary tournament, uniform
crossover (each gene from either parent) with probability ``crossover``, then
mutation (each gene re-drawn uniformly with probability ``rate / dimension``, at
least one gene changed), decoded and simulated; the ``mu`` fastest of parents and
children survive. The first population is the projections of the same seeds the
tuner measures (O0-O3 and the guide's plans that fit, ``autotune.sampling._studies``; a seed
the space cannot express is left out) and uniform random vectors. Every simulated
vector counts as one evaluation (a schedule that does not run counts too, as a
failed measurement does for the tuner); a vector seen before is not simulated again
and costs nothing.

``compare`` runs ``graphtune tune`` (guided, in-process, seeded) with ``budget``
measurements and this search with twice as many on the same cell and prints both
bests: the tuner must reach at least 0.99x the baseline's best (issue 26).

Run:
    .venv/bin/python bench/evo.py --model mobilenet_v2 --batch 16 --evals 800 [--seed 0]
    .venv/bin/python bench/evo.py --compare 400 --cells resnet50:16 mobilenet_v2:16:l1half ...
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

__all__ = ["EvoResult", "evolve", "what_if"]

# what-if targets of issue 26's table (the default STCP920 with one memory halved)
WHAT_IF: dict[str, dict[str, dict[str, int]]] = {
    "default": {},
    "l1half": {"l1": {"data_bytes": 524288}},
    "llbhalf": {"llb": {"bytes": 4 * 1024 * 1024}},
    "ddrhalf": {"ddr": {"bytes_per_cycle": 13}},
}


def what_if(name: str) -> Any:
    """The default target with the changes of :data:`WHAT_IF` ``name``."""
    from compiler.target import Target

    t = Target.default()
    return t.replace(**WHAT_IF[name]) if WHAT_IF[name] else t


@dataclass
class EvoResult:
    """One run: the best latency, its schedule, the best-so-far curve per evaluation."""

    best_us: float
    best_schedule: Any
    curve: list[float]
    evaluations: int
    failed: int
    cpu_s: float


def evolve(graph: Any, target: Any, evals: int, seed: int = 0, mu: int = 16, lam: int = 32,
           rate: float = 2.0, crossover: float = 0.7) -> EvoResult:
    """(mu + lambda) search of ``evals`` simulations over ``graph``'s space on ``target``."""
    from autotune.sampling._studies import seed_schedules
    from search_space import build_space
    from sim import SimResult, simulate

    c0 = time.process_time()
    rng = np.random.default_rng(seed)
    space = build_space(graph, target, graph.batch)
    n = space.n_choices
    dim = len(n)
    seen: dict[bytes, float] = {}
    curve: list[float] = []
    failed = 0
    best: tuple[float, Any] = (float("inf"), None)

    def fitness(v: np.ndarray) -> float | None:
        nonlocal failed, best
        key = v.astype(np.int16).tobytes()
        if key in seen:
            return seen[key]
        if len(curve) >= evals:
            return None
        s = space.decode(v)
        r = simulate(graph, s, target, timeline=False)
        lat = r.latency_us if isinstance(r, SimResult) else float("inf")
        failed += not isinstance(r, SimResult)
        seen[key] = lat
        if lat < best[0]:
            best = (lat, s)
        curve.append(best[0])
        return lat

    pop: list[tuple[float, np.ndarray]] = []
    for _, s in seed_schedules(graph, target):
        proj = space.project(s)
        if proj.vector is None:  # a seed the space cannot express (as the tuner, skip it)
            continue
        v = np.asarray(proj.vector, dtype=np.int16)
        f = fitness(v)
        if f is not None:
            pop.append((f, v))
    for v in space.sample_vectors(rng, max(0, mu - len(pop))):
        f = fitness(v)
        if f is not None:
            pop.append((f, v))
    pop.sort(key=lambda x: x[0])
    pop = pop[:mu]
    stale = 0
    while len(curve) < evals and stale < 50:
        before = len(curve)
        children: list[tuple[float, np.ndarray]] = []
        for _ in range(lam):
            a = _tournament(pop, rng)
            b = _tournament(pop, rng)
            child = a.copy()
            if rng.random() < crossover:
                take = rng.random(dim) < 0.5
                child[take] = b[take]
            flip = rng.random(dim) < rate / dim
            if not flip.any():
                flip[rng.integers(dim)] = True
            child[flip] = (rng.random(int(flip.sum())) * n[flip]).astype(np.int16)
            f = fitness(child)
            if f is None:
                break
            children.append((f, child))
        pop = sorted(pop + children, key=lambda x: x[0])[:mu]
        stale = stale + 1 if len(curve) == before else 0
    return EvoResult(best[0], best[1], curve, len(curve), failed, time.process_time() - c0)


def _tournament(pop: list[tuple[float, np.ndarray]], rng: np.random.Generator) -> np.ndarray:
    i, j = rng.integers(len(pop)), rng.integers(len(pop))
    return pop[min(i, j)][1] if pop[i][0] == pop[j][0] else (
        pop[i][1] if pop[i][0] < pop[j][0] else pop[j][1])


def _graph(model: str, batch: int, **kw: Any) -> Any:
    from compiler import zoo
    from compiler.model import Model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(zoo.build(model, batch=batch, weights="inputs", **kw), name=model).graph


def tuned(graph: Any, target: Any, budget: int, seed: int, log: Path | None = None
          ) -> tuple[float, float]:
    """``graphtune tune`` (guided, in-process, seeded) with ``budget`` measurements:
    ``(best latency µs, CPU s)``; the tuning log goes to ``log`` (a fresh file) when given."""
    from autotune import tune
    from compiler.schedule import GraphSchedule
    from sim import SimResult, simulate

    c0 = time.process_time()
    with tempfile.TemporaryDirectory() as d:
        res = tune([graph], trials=budget, workers=0, log=log or Path(d) / "t.jsonl",
                   sampler="guided", seed=seed, curve=False, target=target)
    (task,) = res.tasks
    r = simulate(graph, GraphSchedule.from_json(task.best_schedule), target, timeline=False)
    assert isinstance(r, SimResult)
    return r.latency_us, time.process_time() - c0


def parse_cell(text: str) -> tuple[str, int, str, dict[str, Any]]:
    """``model:batch[:what-if][:seq=N]`` -> (model, batch, what-if, zoo options)."""
    parts = text.split(":")
    model, batch = parts[0], int(parts[1])
    wif, kw = "default", {}
    for p in parts[2:]:
        if "=" in p:
            k, v = p.split("=", 1)
            kw[k] = int(v)
        else:
            wif = p
    return model, batch, wif, kw


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--what-if", default="default", choices=list(WHAT_IF))
    ap.add_argument("--evals", type=int, default=800)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compare", type=int, default=0, metavar="BUDGET",
                    help="tune with BUDGET measurements vs this search with 2 x BUDGET")
    ap.add_argument("--cells", nargs="*", default=[], help="model:batch[:what-if][:seq=N]")
    ap.add_argument("--json", dest="json_out", default=None, help="append one JSON line per cell")
    ap.add_argument("--logs", default=None, help="keep each cell's tuning log and the "
                    "baseline's best schedule in this directory")
    args = ap.parse_args()
    cells = [parse_cell(c) for c in args.cells] or [(args.model, args.batch, args.what_if, {})]
    print(f"load average at start: {os.getloadavg()[0]:.2f}", flush=True)
    if args.compare:
        print(f"{'cell':<34} {'tuned(' + str(args.compare) + ') us':>14} "
              f"{'evo(' + str(2 * args.compare) + ') us':>14} {'tuned/evo speed':>15} "
              f"{'cpu tune s':>10} {'cpu evo s':>9}", flush=True)
    ratios = []
    for model, batch, wif, kw in cells:
        g, t = _graph(model, batch, **kw), what_if(wif)
        label = f"{model} b{batch} {wif}" + "".join(f" {k}={v}" for k, v in kw.items())
        evals = 2 * args.compare if args.compare else args.evals
        evo = evolve(g, t, evals, seed=args.seed)
        row: dict[str, Any] = {"cell": label, "evo_evals": evo.evaluations,
                               "evo_best_us": evo.best_us, "evo_failed": evo.failed,
                               "evo_cpu_s": evo.cpu_s, "load_1min": os.getloadavg()[0]}
        stem = label.replace(" ", "_").replace("=", "")
        if args.logs:
            Path(args.logs).mkdir(parents=True, exist_ok=True)
            if evo.best_schedule is not None:
                evo.best_schedule.save(Path(args.logs) / f"{stem}.evo_best.json")
        if args.compare:
            log = Path(args.logs) / f"{stem}.tune.jsonl" if args.logs else None
            if log is not None and log.exists():
                log.unlink()
            lat, cpu = tuned(g, t, args.compare, args.seed, log)
            speed = evo.best_us / lat  # > 1: the tuner is faster
            ratios.append(speed)
            row.update({"tuned_budget": args.compare, "tuned_best_us": lat, "tuned_cpu_s": cpu,
                        "tuned_over_evo": speed})
            print(f"{label:<34} {lat:>14,.1f} {evo.best_us:>14,.1f} {speed:>15.4f} "
                  f"{cpu:>10.1f} {evo.cpu_s:>9.1f}", flush=True)
        else:
            print(f"{label}: best {evo.best_us:,.1f} us after {evo.evaluations} evaluations "
                  f"({evo.failed} failed), {evo.cpu_s:.1f} CPU s", flush=True)
        if args.json_out:
            with open(args.json_out, "a") as f:
                f.write(json.dumps(row) + "\n")
    if ratios:
        geo = float(np.exp(np.mean(np.log(ratios))))
        print(f"tuned/evo (evo latency / tuned latency): min {min(ratios):.4f}, geomean "
              f"{geo:.4f} (goal: min >= 0.99, geomean >= 1.01)")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

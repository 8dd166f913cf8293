"""Search efficiency: measurements to reach 95% of the best-known schedule, per sampler.

Same simulator, same budget, several seeds, in-process (``--workers 0``: the
measurement count, not wall time, is the figure). The best-known schedule is
the fastest found by any run here (or in ``--best-log`` files); "95%" means
95% of its throughput, i.e. latency <= best / 0.95.

By default the samplers start from scratch: a tuning job measures O0-O3 and the
guide's plan first, and on a model where the plan is within 5% of the best
known every sampler "reaches 95%" with its first measurement, which measures
nothing about the search (``--seeded`` runs the jobs as ``graphtune tune`` does). Prints, per sampler, the
measurements each seed needed (``-`` when the budget ran out first), their
median, and the guided sampler's ratio to TPE and to random; draws the mean
best-so-far curves to ``bench/out/search_efficiency_<model>.png``.

Run: ``.venv/bin/python bench/search_efficiency.py [--model resnet50] [--budget 300]
[--seeds 0 1 2] [--samplers guided tpe random]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _tuning import MODELS, best_so_far, reach, zoo_graph  # noqa: E402

from autotune import tune  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50", choices=sorted(MODELS))
    ap.add_argument("--budget", type=int, default=300)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--samplers", nargs="+", default=["guided", "tpe", "random"])
    ap.add_argument("--best-log", type=Path, nargs="*", default=[],
                    help="Logs of the same model whose best counts as best-known.")
    ap.add_argument("--keep", type=Path, default=None, help="Keep the logs in this directory.")
    ap.add_argument("--seeded", action="store_true",
                    help="Measure O0-O3 and the plans first, as graphtune tune does.")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=V",
                    help="A what-if target: one value of the default target changed, as "
                         "graphtune sweep's --set (e.g. l1.data_bytes=512K); repeatable.")
    args = ap.parse_args()
    target = _target(args.sets)

    graph = zoo_graph(args.model)
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="search_eff_"))
    workdir.mkdir(parents=True, exist_ok=True)
    curves: dict[str, list[list[float]]] = {}
    seconds: dict[str, list[float]] = {}
    for sampler in args.samplers:
        for seed in args.seeds:
            log = workdir / f"{args.model}_{sampler}_{seed}.jsonl"
            t0 = time.perf_counter()
            tune([graph], trials=args.budget, workers=0, log=log, sampler=sampler, seed=seed,
                 curve=False, seeds=args.seeded, target=target)
            seconds.setdefault(sampler, []).append(time.perf_counter() - t0)
            curves.setdefault(sampler, []).append(best_so_far(log)[: args.budget])
            print(f"{sampler} seed {seed}: best {curves[sampler][-1][-1]:,.1f} µs "
                  f"in {seconds[sampler][-1]:.0f} s", flush=True)
    best = min(c[-1] for cs in curves.values() for c in cs)
    for extra in args.best_log:
        best = min(best, min(best_so_far(extra)))
    goal = best / 0.95
    print(f"\n{args.model}{''.join(' ' + x for x in args.sets)}: best-known {best:,.1f} µs; "
          f"target (95% of its throughput) {goal:,.1f} µs; budget {args.budget}, seeds "
          f"{args.seeds}, {'seeded with O0-O3 and the plans' if args.seeded else 'from scratch'}")
    print("for reference: " + ", ".join(f"{label} {lat:,.1f} µs"
                                        for label, lat in _seeds(graph, target)))
    print(f"{'sampler':8} {'per seed':>24} {'median':>7} {'best µs (mean)':>15} {'s/run':>7}")
    medians: dict[str, float] = {}
    for sampler, cs in curves.items():
        needed = [reach(c, goal) for c in cs]
        shown = " ".join(str(n) if n is not None else "-" for n in needed)
        # A run that never reached the target counts as needing more than the budget.
        med = statistics.median([n if n is not None else args.budget + 1 for n in needed])
        medians[sampler] = med
        print(f"{sampler:8} {shown:>24} {med:>7.0f} {statistics.mean(c[-1] for c in cs):>15,.1f} "
              f"{statistics.mean(seconds[sampler]):>7.0f}")
    if "guided" in medians:
        for other in ("tpe", "random"):
            if other in medians:
                print(f"guided / {other}: {medians['guided'] / medians[other]:.2f} "
                      f"(goal <= {0.5 if other == 'tpe' else 0.25})")
    _plot(curves, best, goal, args.model)


def _target(sets: list[str]) -> Any:
    """The default target with the ``--set KEY=V`` changes, as ``graphtune sweep`` reads them
    (``l1.data_bytes=512K``: one value each; the target's own checks apply)."""
    from autotune.whatif import make_variants, parse_set
    from compiler.errors import GraphtuneError
    from compiler.target import Target

    if not sets:
        return Target.default()
    try:
        variants = make_variants(Target.default(), [parse_set(x) for x in sets])
    except GraphtuneError as exc:
        raise SystemExit(f"search_efficiency: {exc}") from None
    if len(variants) != 1:
        raise SystemExit("search_efficiency: --set takes one value per key (a sweep is "
                         "graphtune sweep's job)")
    return variants[0].target


def _seeds(graph: Any, target: Any) -> list[tuple[str, float]]:
    """Latency of O0-O3 and the fitting plans on ``target``."""
    from autotune.sampling._studies import seed_schedules
    from sim import measure

    seeds = seed_schedules(graph, target)
    ms = measure(graph, [s for _, s in seeds], target)
    return [(label, m.latency_us) for (label, _), m in zip(seeds, ms) if m.ok and m.latency_us]


def _plot(curves: dict[str, list[list[float]]], best: float, target: float, model: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    OUT.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for sampler, cs in curves.items():
        n = min(len(c) for c in cs)
        arr = np.array([c[:n] for c in cs])
        arr[~np.isfinite(arr)] = np.nan
        ax.plot(np.arange(1, n + 1), np.nanmean(arr, axis=0), label=f"{sampler} (mean of {len(cs)})")
    ax.axhline(target, color="grey", linestyle="--", linewidth=1, label="95% of best-known")
    ax.axhline(best, color="black", linestyle=":", linewidth=1, label="best-known")
    ax.set_xlabel("measurements")
    ax.set_ylabel("best latency so far (µs)")
    ax.set_title(f"search efficiency, {model}")
    finite = [v for cs in curves.values() for c in cs for v in c if np.isfinite(v)]
    ax.set_ylim(best * 0.98, min(max(finite), best * 2.0))
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = OUT / f"search_efficiency_{model}.png"
    fig.savefig(path, dpi=110)
    print(f"curves: {path}")


if __name__ == "__main__":
    main()

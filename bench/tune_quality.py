"""Tuning quality: the tuned schedule against the guide's plan and the best of O0-O3.

For each acceptance model (ResNet-50 b16, BERT-base s128 b8, MobileNetV2 b16,
DeepFM b2560) tune ``--trials`` measurements and print the best latency, the
baselines, the speed-ups (throughput ratios) and latency over the lower bound.
Acceptance: the tuned schedule is >= every baseline on every model; goal >= 1.15x
the best baseline on at least two. Logs stay in ``--out`` (resumable).

``--breed-budget X`` sets the guided sampler's ``breed_budget`` (``inf``: the fixed
breeding effort; default: what ``tune`` uses). ``--polish-kick N`` turns on the polish's
kicks (``GuidedOptions.polish_kick``; default 0: off, as ``tune``). ``--polish-deep N``
sets the proposals per schedule of the polish's second ring (``GuidedOptions.polish_deep``,
:mod:`autotune.sampling._deep`; default: what ``tune`` uses, 48; 0: off). Each model's
line says how many measurements the polish's rings proposed (first / second), when
the best was measured and when a schedule within 2 % of it was (the first latency <=
best / 0.98). ``--fit-budget X`` sets ``GuidedOptions.fit_budget`` (default: what ``tune``
uses, ``autotune._tune.FIT_BUDGET``).

Run: ``.venv/bin/python bench/tune_quality.py [--trials 1000] [--workers 2]
[--models resnet50 bert_base mobilenet_v2 deepfm] [--out bench/out/quality]
[--breed-budget X] [--polish-kick N] [--polish-deep N] [--fit-budget X]``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _tuning import MODELS, zoo_graph  # noqa: E402

from autotune import GuidedOptions, RunOptions, SearchOptions, tune  # noqa: E402


def _x(v: float | None) -> str:
    return f"{v:.3f}x" if v else "-"


def _polish_counts(log: Path) -> tuple[int, int, int, int]:
    """(first-ring, second-ring measurements, the record numbers of the best and of the
    first within 2 % of it) in a log."""
    from autotune.sampling._polish import PROV_POLISH, is_deep

    first = second = at = 0
    best = float("inf")
    seen: list[float] = []
    for k, line in enumerate(log.read_text().splitlines()):
        r = json.loads(line)
        mark = r["prov"].get(PROV_POLISH, "")
        first += bool(mark) and not is_deep(mark)
        second += bool(mark) and is_deep(mark)
        ok = r["result"]["status"] == "ok"
        seen.append(r["result"]["latency_us"] if ok else float("inf"))
        if ok and r["result"]["latency_us"] < best:
            best, at = r["result"]["latency_us"], k + 1
    near = next((k + 1 for k, v in enumerate(seen) if v <= best / 0.98), 0)
    return first, second, at, near


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sampler", default="guided")
    ap.add_argument("--breed-budget", type=float, default=None)
    ap.add_argument("--polish-kick", type=int, default=0)
    ap.add_argument("--polish-deep", type=int, default=None)
    ap.add_argument("--fit-budget", type=float, default=None)
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=sorted(MODELS))
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out" / "quality")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    deep = {} if args.polish_deep is None else {"polish_deep": args.polish_deep}
    for key in args.models:
        graph = zoo_graph(key)
        t0 = time.perf_counter()
        guided = GuidedOptions(breed_budget=args.breed_budget, polish_kick=args.polish_kick,
                               fit_budget=args.fit_budget, **deep)
        res = tune([graph], trials=args.trials, log=args.out / f"{key}.jsonl",
                   search=SearchOptions(sampler=args.sampler, seed=args.seed, guided=guided),
                   run=RunOptions(workers=args.workers))
        (t,) = res.tasks
        base = min(v for v in (t.baseline("plan:"), t.baseline("O")) if v)
        rows.append((key, t, base, time.perf_counter() - t0, res.measurements_per_s))
        first, second, at, near = _polish_counts(args.out / f"{key}.jsonl")
        print(f"{key}: {t.records} records, best {t.best_latency_us:,.1f} µs "
              f"({_x(base / t.best_latency_us if t.best_latency_us else None)} the best baseline; "
              f"measured {at}th, within 2 % at the {near}th; polish rings measured {first} / "
              f"{second})", flush=True)
    print(f"\n{'model':13} {'n':>5} {'best µs':>10} {'O3 µs':>10} {'plan µs':>10} {'O0-3 µs':>10} "
          f"{'xO3':>7} {'xplan':>7} {'xO0-3':>7} {'xbest':>7} {'/bound':>7} {'meas/s':>7} {'s':>6}")
    wins = 0
    ok = True
    for key, t, base, secs, rate in rows:
        best = t.best_latency_us or float("inf")
        ratio = base / best
        wins += ratio >= 1.15
        ok &= ratio >= 1.0
        plan = t.baseline("plan:")
        print(f"{key:13} {t.records:>5} {best:>10,.1f} {t.baseline('O3') or 0:>10,.1f} "
              f"{plan or 0:>10,.1f} {t.baseline('O') or 0:>10,.1f} {_x(t.speedup('O3')):>7} "
              f"{_x(t.speedup('plan:')):>7} {_x(t.speedup('O')):>7} {_x(ratio):>7} "
              f"{t.latency_over_bound or 0:>7.2f} {rate:>7.1f} {secs:>6.0f}")
    print(f"\n>= every baseline on every model: {'yes' if ok else 'NO'}; "
          f">= 1.15x the best baseline on {wins} model(s) (goal: 2)")


if __name__ == "__main__":
    main()

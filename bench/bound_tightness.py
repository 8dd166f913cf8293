"""Best-known latency over the lower bound, per suite model, with the roofline and with the work bound.

For each model of the benchmark suite (``bench/_suite.py``) the best latency any
run of the suite found (``bench/results/suite/runs/*.json``: every search's best,
every baseline) is set against the roofline (``compiler.bound.roofline_cycles``, the
bound before issue 26) and against :func:`sim.lower_bound` (the roofline or the work
bound of ``compiler/work_bound.py``, whichever is larger). A best below the bound is a
finding (the bound would not be a bound): the script exits 1.

The suite's runs were simulated when they ran; a best is re-simulated only through
its figures, so a simulator change since then shows as a different best: run the
suite again (``make bench-tune``) for a fresh one.

Run: ``.venv/bin/python bench/bound_tightness.py [--runs bench/results/suite/runs]``
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._suite import SUITE  # noqa: E402


def best_known(runs: Path, key: str) -> tuple[float | None, int]:
    """The best latency of ``key`` in the suite's run files, and how many figures were read."""
    best, seen = None, 0
    for path in sorted(runs.glob(f"{key}_*.json")):
        run = json.loads(path.read_text())
        lats = []
        if run.get("method") == "baselines":
            lats = [b.get("latency_us") for b in run.get("baselines", {}).values()]
        else:
            lats = [run.get("best", {}).get("latency_us")]
            lats += list(run.get("curve") or [])
        for x in lats:
            if isinstance(x, int | float):
                seen += 1
                best = x if best is None else min(best, x)
    return best, seen


def main() -> int:
    from compiler.bound import launch_cycles, lower_bound_cycles, roofline_cycles
    from compiler.target import Target

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default=str(Path(__file__).parent / "results" / "suite" / "runs"))
    args = ap.parse_args()
    t = Target.default()
    bad = 0
    total = 0
    print(f"{'model':<28} {'figures':>7} {'best us':>10} {'roofline':>9} {'bound':>9} "
          f"{'best/roof':>9} {'best/bound':>10}")
    for key, spec in SUITE.items():
        best, seen = best_known(Path(args.runs), key)
        total += seen
        g = spec.graph()
        roof = t.cycles_to_us(roofline_cycles(g, spec.batch, t) + launch_cycles(t))
        bound = t.cycles_to_us(lower_bound_cycles(g, spec.batch, t))
        if best is None:
            print(f"{spec.label:<28} {seen:>7} {'-':>10} {roof:>9.1f} {bound:>9.1f}")
            continue
        flag = "  BELOW THE BOUND" if best < bound * (1 - 1e-9) else ""
        bad += bool(flag)
        print(f"{spec.label:<28} {seen:>7} {best:>10.1f} {roof:>9.1f} {bound:>9.1f} "
              f"{best / roof:>9.3f} {best / bound:>10.3f}{flag}", flush=True)
    print(f"{total} figures read; {bad} model(s) with a best below the bound")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""The CPU of a tune's cost-model retrainings, on the rows a real tune retrained on.

``--capture FILE`` runs an in-process tune (``--model``, ``--trials``, seed 0) and keeps
the rows and speeds of each of its retrainings (``CostModelRanker.fit``) in ``FILE``
(``.npz``). Then (or with ``--fits FILE`` alone) every retraining is done again
``--repeat`` times as a tune does it (``cost_model.XGBModel`` with
``autotune.sampling._ranker``'s ``FIT_PARAMS`` and ``REFIT``, seeds ``--seeds``), and the
CPU ms of each (the least of the repeats) and the rounds kept are printed.

Under ``valgrind --tool=callgrind`` (with ``OMP_NUM_THREADS=1``), a run with ``--no-fit``
(the same imports and data, no training) gives the fixed part: the difference is the
instructions of the retrainings, load-independent; run it from two trees to compare them
(issue 20: the driver's retraining CPU per measurement, ``bench/results/tuning.md``).

Run: ``python bench/fit_cost.py --capture /tmp/fits.npz [--model bert_base]`` then
``python bench/fit_cost.py --fits /tmp/fits.npz [--repeat 3] [--no-fit]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _tuning import zoo_graph  # noqa: E402  (and the tree before bench/: its cost_model.py)


def capture(model: str, trials: int, out: Path) -> None:
    """Tune ``model`` in process and keep each retraining's rows in ``out``."""
    from autotune import RunOptions, SearchOptions, tune
    from autotune.sampling import _ranker

    caught: list[tuple[np.ndarray, np.ndarray]] = []
    real = _ranker.CostModelRanker.fit

    def fit(self: Any, x: np.ndarray, y: np.ndarray) -> None:
        caught.append((np.array(x), np.array(y)))
        real(self, x, y)

    _ranker.CostModelRanker.fit = fit  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory() as d:
            tune([zoo_graph(model)], trials=trials, log=Path(d) / "t.jsonl",
                 search=SearchOptions(seed=0), run=RunOptions(workers=0, curve=False))
    finally:
        _ranker.CostModelRanker.fit = real  # type: ignore[method-assign]
    np.savez(out, **{f"x{i}": x for i, (x, _) in enumerate(caught)},
             **{f"y{i}": y for i, (_, y) in enumerate(caught)})
    print(f"{len(caught)} retrainings kept in {out}: rows {[len(y) for _, y in caught]}")


def refit(fits: Path, repeat: int, seeds: list[int], train: bool) -> None:
    """Do every kept retraining again (see the module doc)."""
    import xgboost  # noqa: F401  (imported by the first training: in the fixed part too)

    from autotune.sampling._ranker import FIT_PARAMS, REFIT
    from cost_model import XGBModel

    data = np.load(fits)
    total = 0.0
    for i in range(len(data.files) // 2):
        x, y = data[f"x{i}"], data[f"y{i}"]
        for seed in seeds:
            best = float("inf")
            kept = 0
            for _ in range(repeat):
                m = XGBModel(seed=seed, params=dict(FIT_PARAMS), refit=REFIT,
                             features=[f"f{j}" for j in range(x.shape[1])])
                c0 = time.process_time()
                if train:
                    m.fit(x, y)
                best = min(best, time.process_time() - c0)
                kept = m._booster.num_boosted_rounds() if m._booster is not None else 0
            total += best
            print(f"rows {len(y):5d} seed {seed}: {1e3 * best:7.2f} CPU ms, {kept} rounds kept")
    print(f"all: {1e3 * total:.1f} CPU ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capture", type=Path, default=None, help="tune and keep the rows here")
    ap.add_argument("--fits", type=Path, default=None, help="retrain on the rows kept here")
    ap.add_argument("--model", default="bert_base")
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seeds", default="0", help="comma-separated model seeds")
    ap.add_argument("--no-fit", action="store_true", help="everything but the training")
    args = ap.parse_args()
    if args.capture is not None:
        capture(args.model, args.trials, args.capture)
    fits = args.fits or args.capture
    if fits is None:
        ap.error("give --capture FILE or --fits FILE")
    refit(fits, args.repeat, [int(s) for s in args.seeds.split(",")], not args.no_fit)


if __name__ == "__main__":
    main()

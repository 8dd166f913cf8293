"""A warm-started variant's cold share: its probe first spends measurements as a cold tune would.

Why (``bench/results/sweep.md``, h84): on ResNet-50 b16, seed 1, the L1 1M / DDR 13
variant's warm probe (seeds projected from the variants probed before it, a cost model
trained on their rows) never proposed the schedules that cut stage 3 at ops 128/129 with
split 1 there (1 of its 204 measurements went near that cut), while a cold 400-trial tune
of that variant (no seeds from elsewhere, the roofline estimate ranking) measured that
cut at its 22nd measurement (9,252.8 us against the warm sweep's final 9,402.1) and 323
of its 400 measurements went there. The other variants' rows teach the cost model what
is fast *there* (on DDR 27, or with less L1, that cut is not), so a warm probe can only
find what its neighbours found. A share of every warm probe (:func:`cold_share`: a quarter) is
therefore a cold tune of the variant, exactly as the cold reference starts it (same
study, seed and sampler: O0-O3, the guide's plans, then the guided sampler ranked by the
roofline estimate, without the shipped model and without warm seeds); the warm tune
then continues the same study to the probe's size, so the total does not change.

Like every ``tune``, the share is counted in the log: a killed sweep re-run measures
nothing twice (the share's ``trials`` is a number of records the log should hold).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autotune.job._state import JobState
    from autotune.job._tasks import Task
    from autotune.whatif._targets import Variant

__all__ = ["COLD_SHARE", "cold_share", "cold_start"]

COLD_SHARE = 0.25
"""Share of a warm variant's probe spent as a cold tune. Measured on ResNet-50 b16 (h84,
``bench/results/sweep.md``): a half (25 of a 50-measurement probe) took the warm seeds'
measurements from the variants whose cold start is poor (L1 384K / DDR 27, seed 1: 0.9778
of the cold reference, against 0.9885 without a share); a quarter (12) kept the cold
start's own line (1M / DDR 13, seed 1: the cut at ops 98/99 at its 6th measurement, from
which it reached 9,193.3 us) and left the warm seeds 38 measurements of the probe."""


def cold_share(probe: int) -> int:
    """Records of a warm variant's probe of ``probe`` measurements measured cold first."""
    return int(probe * COLD_SHARE)


def cold_start(tasks: Sequence[Task], variant: Variant, trials: int, log_path: str,
               seed: int | None, workers: int | None,
               callbacks: Sequence[Callable[[JobState], None]]) -> int:
    """Tune ``variant`` cold until the log holds ``trials`` of its records; the number measured.

    A cold tune's options (no warm seeds, no ranker from elsewhere, no shipped model), so
    its measurements are a cold reference tune's first ones with the same seed.
    """
    from autotune._options import RunOptions, SearchOptions
    from autotune._tune import tune

    if trials < 1:
        return 0
    res: Any = tune(tasks, trials=trials, log=log_path, target=variant.target,
                    search=SearchOptions(seed=seed),
                    run=RunOptions(workers=workers, callbacks=list(callbacks), curve=False))
    return int(res.measured)

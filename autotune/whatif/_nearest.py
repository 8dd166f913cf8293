"""Which finished variants a variant of a sweep starts from: the nearest first.

A variant's warm start (:mod:`autotune.whatif._sweep`) reuses what the variants
tuned before it learnt: their fastest schedules, measured first, and their
measurements, as rows of its cost model. How much that is worth depends on how
alike the two chips are, and the simulator says what "alike" means: every cost
term is a ratio of a schedule's demand to a rate or a capacity of the target
(bytes over DDR bytes per cycle, a group's working set against the L1 and LLB
capacities, MACs over the engines' rates). Halving a rate or a capacity doubles
that term whatever its absolute size, so two variants are as far apart as the
factors between their values: the distance is the sum over the swept keys of
``|log2(a / b)|`` (a factor of two in any parameter counts 1; a key whose values
are not positive numbers counts 1 when they differ).

What far means was measured (``bench/results/sweep.md``, 2026-11-26): on
MobileNetV2 b16, the fastest schedules of the 1M-L1 variant cut the graph into
groups whose working sets do not fit a 384K L1; projected into the 384K space
they fit only once re-tiled, and ran several times slower than that variant's
own best, and a cost model trained on the 1M rows ranked worse there than the
roofline estimate. So a variant takes schedules only from its nearest finished
variants (:func:`seed_sources`), and rows from each finished variant in
proportion to its closeness (:func:`prior_rows`: half as many per unit of
distance beyond the nearest one's).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from autotune.whatif._targets import Variant

__all__ = ["distance", "prior_rows", "ranked", "seed_sources"]

TIE = 1e-9


def _term(a: Any, b: Any) -> float:
    if isinstance(a, bool) or isinstance(b, bool):
        return 0.0 if a == b else 1.0
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > 0 and b > 0:
        return abs(math.log2(float(a) / float(b)))
    return 0.0 if a == b else 1.0


def distance(a: Variant, b: Variant) -> float:
    """Sum over the keys either variant sets of ``|log2(a / b)|`` (1 for unequal non-numbers).

    A key that only one of them sets is compared with the other's target's value
    of it (its base value), so variants of different sweeps compare too.
    """
    keys = sorted(set(a.values) | set(b.values))
    return sum(_term(_value(a, k), _value(b, k)) for k in keys)


def _value(v: Variant, key: str) -> Any:
    if key in v.values:
        return v.values[key]
    section, dot, field = key.partition(".")
    data = v.target.to_dict()
    return data[section][field] if dot else data[key]


def ranked(variant: Variant, finished: Sequence[Variant]) -> list[tuple[float, Variant]]:
    """``(distance, variant)`` of the finished variants, nearest first (ties: sweep order)."""
    return sorted(((distance(variant, f), f) for f in finished), key=lambda dv: dv[0])


def seed_sources(variant: Variant, finished: Sequence[Variant]) -> list[Variant]:
    """The finished variants whose best schedules ``variant`` measures first: the nearest ones.

    Every finished variant at the smallest distance (several when they are equally
    near, e.g. one step down and one step up the same parameter); none when
    nothing is finished.
    """
    by = ranked(variant, finished)
    if not by:
        return []
    near = by[0][0]
    return [f for d, f in by if d <= near + TIE]


def prior_rows(variant: Variant, finished: Sequence[Variant], most: int) -> dict[str, int]:
    """Target key -> how many of its rows (its fastest) the variant's cost model trains on.

    ``most`` for the nearest variants, half as many for each unit of distance beyond
    theirs (a factor of two further in one parameter); a variant that would
    contribute fewer than ``most // 16`` rows contributes none.
    """
    by = ranked(variant, finished)
    if not by:
        return {}
    near = by[0][0]
    out: dict[str, int] = {}
    for d, f in by:
        n = int(most * 2.0 ** -(d - near))
        if n >= max(1, most // 16):
            out[f.key] = n
    return out

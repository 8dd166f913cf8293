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

What far means was measured on MobileNetV2 b16 (``bench/results/sweep.md``,
2026-11-26, DDR at 13 B/cycle): the fastest schedules of the 1M-L1 variant cannot
be expressed in the 384K variant's space at all; on the 768K variant the 1M
variant's best runs at 1,621 µs (the best known there: 1,618 µs) and the 512K
variant's at 1,911 µs, slower than 768K's own O3 (1,768 µs). So a variant takes
schedules only from its nearest finished variants (:func:`seed_sources`), rows
from each finished variant in proportion to its closeness (:func:`prior_rows`:
half as many per unit of distance beyond the nearest one's), and the sweep
tunes the base target's nearest variants first (:func:`tuning_order`).

The nearest variant is not always one whose schedules fit, though: on ResNet-50 b16
(``bench/results/sweep.md``, 2026-11-27, h70) the L1 384K / DDR 13 variant's nearest
is 512K / DDR 13 (distance 0.42), whose best schedules all overflow a 384K L1 (the
warm start seeded nothing), while the 384K / DDR 27 variant (distance 1.05), whose
best runs at 17,352 µs on 384K / DDR 13, was never offered: that variant's own tune
reached 17,518 µs only at its 217th measurement. What fits a chip depends only on its
capacities (:func:`compiler.capacity.check_capacity` and the search space read the
L1, LLB and DDR sizes, the cores and the data type, no rate or latency), so a
variant that differs only in rates (:func:`same_capacities`) has every schedule fit,
and the seeds also come from the nearest finished such variant.

Late in a sweep (its later chunks and its final cross-round: :mod:`autotune.whatif._sweep`)
every other variant's best is a seed too (:func:`cross_sources`): on ResNet-50 b16
(``bench/results/sweep.md``, h77, seed 0) the 384K / DDR 27 variant's best ran at 16,108 µs
on 384K / DDR 13 and 512K / DDR 13's at 8,840 on 512K / DDR 27, ahead of those variants' own
bests at the time. A variant with at least another's resources (:func:`dominates`: every
capacity and rate at least as large, every latency at most as large) runs every schedule of
the smaller one, so the smaller one's best is its cheapest upper bound: those come first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from autotune.whatif._targets import Variant

__all__ = ["cross_sources", "distance", "dominates", "from_base", "is_rate", "lenders", "prior_rows",
           "ranked", "same_capacities", "seed_sources", "tuning_order"]

TIE = 1e-9
RATE_SUFFIXES = ("_per_cycle", "_cycles", "_per_element", "_per_s", "_us", "_rate")
"""Target fields that are rates or latencies (``ddr.bytes_per_cycle``, ``dma.setup_cycles``,
``matrix.int8_rate``...): they change how fast a schedule runs, never whether it fits."""
LATENCY_SUFFIXES = ("_cycles", "_us", "_per_element")
"""Rate-like fields where less is faster (a latency or a cost per element)."""
CAPACITY_FIELDS = ("l1.data_bytes", "l1.weight_bytes", "llb.bytes", "ddr.bytes")
"""The memories' sizes: more never makes a schedule that fits stop fitting."""


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


def is_rate(key: str) -> bool:
    """Whether the target key ``key`` is a rate or a latency (``clock_hz`` is one): a key that
    the capacity check and the search space do not read."""
    field = key.rpartition(".")[2]
    return field == "clock_hz" or field.endswith(RATE_SUFFIXES)


def same_capacities(a: Variant, b: Variant) -> bool:
    """Whether the two variants differ in rates and latencies only (:func:`is_rate`): then a
    schedule that fits one fits the other."""
    keys = set(a.values) | set(b.values)
    return all(is_rate(k) or _value(a, k) == _value(b, k) for k in keys)


def _more(key: str) -> int:
    """+1 if a larger value of ``key`` is more of a resource, -1 if a smaller one is, 0 if
    neither is known (a granule, a mesh shape, a data type: not ordered)."""
    if key in CAPACITY_FIELDS:
        return 1
    if not is_rate(key):
        return 0
    return -1 if key.rpartition(".")[2].endswith(LATENCY_SUFFIXES) else 1


def dominates(a: Variant, b: Variant) -> bool:
    """Whether ``a`` has at least ``b``'s resources: on every key either sets, the same value,
    or a larger capacity or rate, or a smaller latency (:data:`CAPACITY_FIELDS`,
    :func:`is_rate`). Then every schedule that fits ``b`` fits ``a`` and has no less of any
    memory or rate there. A key that is not ordered (:func:`_more` 0) must be equal."""
    for k in set(a.values) | set(b.values):
        x, y = _value(a, k), _value(b, k)
        if x == y:
            continue
        way = _more(k)
        if not way or isinstance(x, bool) or not isinstance(x, (int, float)) \
                or not isinstance(y, (int, float)):
            return False
        if (x - y) * way < 0:
            return False
    return True


def lenders(live: Sequence[Variant]) -> dict[str, list[str]]:
    """Variant key -> the keys of the other variants it dominates (:func:`dominates`: each of
    their schedules fits it), the most constrained first (the one the most variants dominate),
    then in ``live``'s order: whom a stalled variant may lend a chunk to
    (:func:`autotune.whatif._budget.lend_to`)."""
    over = {w.key: sum(dominates(v, w) for v in live if v.key != w.key) for w in live}
    return {v.key: sorted((w.key for w in live if w.key != v.key and dominates(v, w)),
                          key=lambda k: -over[k]) for v in live}


def cross_sources(variant: Variant, others: Sequence[Variant]) -> list[Variant]:
    """The other variants whose best schedule ``variant`` also measures late in a sweep: every
    one that :func:`seed_sources` does not already give, those ``variant`` dominates
    (:func:`dominates`: their schedules fit it as they are) first, then the nearest first."""
    have = {f.key for f in seed_sources(variant, others)}
    rest = [(d, f) for d, f in ranked(variant, others) if f.key not in have]
    return [f for _d, f in sorted(rest, key=lambda df: not dominates(variant, df[1]))]


def ranked(variant: Variant, finished: Sequence[Variant]) -> list[tuple[float, Variant]]:
    """``(distance, variant)`` of the finished variants, nearest first (ties: sweep order)."""
    return sorted(((distance(variant, f), f) for f in finished), key=lambda dv: dv[0])


def seed_sources(variant: Variant, finished: Sequence[Variant]) -> list[Variant]:
    """The finished variants whose best schedules ``variant`` measures first: the nearest ones.

    Every finished variant at the smallest distance (several when they are equally
    near, e.g. one step down and one step up the same parameter), then every one at the
    smallest distance among those with the same capacities (:func:`same_capacities`:
    their schedules all fit, where the nearest one's may not); none when nothing is
    finished.
    """
    by = ranked(variant, finished)
    if not by:
        return []
    near = by[0][0]
    out = [f for d, f in by if d <= near + TIE]
    alike = [(d, f) for d, f in by if same_capacities(variant, f)]
    if alike:
        have = {f.key for f in out}
        out += [f for d, f in alike if d <= alike[0][0] + TIE and f.key not in have]
    return out


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


def from_base(v: Variant) -> float:
    """The variant's distance from its sweep's base target (0 when the base is not known)."""
    return sum(_term(v.values[k], v.base[k]) for k in v.values if k in v.base)


def tuning_order(variants: Sequence[Variant]) -> list[int]:
    """Indices of ``variants`` in the order a sweep tunes them: the base target's nearest first.

    The first variant tuned has no finished variant to start from. O0-O3 and the
    guide's plans were made for the base chip (on the STCP920, O3 on MobileNetV2
    b16 is within 0.1% of a 400-trial tune; with L1 at 384K it is 13x slower), so
    the variant nearest the base loses least by starting cold; then each variant
    is tuned after nearer ones, so it has a finished neighbour (ties: the order
    given). The table keeps the order given.
    """
    return sorted(range(len(variants)), key=lambda i: from_base(variants[i]))

"""How a sweep spends its measurements: a probe per variant, then the rest where it still pays.

A sweep's budget is ``trials_per_variant`` times the variants, but variants are not
alike: where the nearest finished variant's best schedule is this variant's best
too (on MobileNetV2 b16, the L1 768K and 1M variants: within 2% at the first
measurement), more measurements find nothing, while across a regime change (L1
512K and below, where O3 is 7-13x off the best) a cold tune still improves after
140 measurements (``bench/results/sweep.md``). So, as Ansor's task scheduler
does for the tasks of one model (:mod:`autotune.job._scheduler`), the sweep first
gives every variant a probe of :func:`probe_size` measurements (in the tuning
order, each warm from the ones probed before it), then hands out the rest in
chunks of :func:`chunk_size`, each to the variant whose best latency is expected
to fall the most per measurement, relative to itself (the sweep's goal is every
variant's best, not their sum):

    score = alpha * backward + (1 - alpha) * forward

``backward`` the relative gain over its last chunk per measurement (within the
second half of its history: a variant's first records are O0-O3, and O0 alone is
40x off the best on MobileNetV2 b16, which would make the base variant, whose O3
is its best, look like the one still improving), and ``forward`` Ansor's
optimistic guess capped by the physical floor, in relative terms: the distance
from its best to its floor (the simulator's lower bound of its tasks,
``sim.lower_bound``, which counts each engine's work and so moves with the
variant) over its best, spread over the measurements it had. A variant whose
best is at its floor gets nothing more (on MobileNetV2 b16 the STCP920's best is
3 % above the 1,469 µs floor, the L1 384K / DDR 13 variant's 27 % after 50
measurements); one whose best stalls far above it still gets chunks, fewer as it
has more. Records a variant holds beyond its allotment (a sweep re-run with
another allocation) count towards the total.

The allotment is a function of the log alone (:func:`allot` replays it from each
variant's first records, counting every record already in the log towards the
total), so a killed sweep re-run measures nothing twice and never exceeds the
total; the chunks it has left may go elsewhere than an uninterrupted run's (a
variant's records past its replayed allotment are counted before they are
handed out), so the two tables agree within the search's noise, not exactly.

The chunks leave :func:`cross_reserve` of the total for the sweep's final cross-round
(each variant measures the other variants' final bests: :mod:`autotune.whatif._sweep`),
which stops at the total too, so a re-run of a finished sweep measures nothing; what
the round leaves of the reserve is handed out in chunks after it (``allot`` without one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from autotune.sampling._polish import STALL_TOL

if TYPE_CHECKING:
    from autotune.sampling._guided import GuidedOptions

__all__ = ["ALPHA", "CROSS_MOST", "GENERATIONS", "POPULATION", "RESTART_TOL", "STALL_TOL", "TWIN",
           "allot", "chunk_guided", "chunk_size", "cross_reserve", "later_options", "lend_to",
           "probe_size", "score", "screened", "stalled"]

ALPHA = 0.2
"""Weight of the last chunk's gain against the average gain (Ansor's ``alpha``)."""


CROSS_MOST = 7
"""Most measurements of a variant in the sweep's final cross-round (one per other variant's
best, the brief's "at most ~7": a sweep of 8 variants)."""


def cross_reserve(n_variants: int) -> int:
    """Measurements the chunks leave for the final cross-round: up to :data:`CROSS_MOST`
    (one per other variant) for each of ``n_variants`` variants."""
    return n_variants * min(CROSS_MOST, max(n_variants - 1, 0))


POPULATION = 192
"""Candidates bred per generation by :func:`screened` (a tune's default: 96)."""

GENERATIONS = 4
"""Generations of model-guided evolution per round by :func:`screened` (a tune's default: 2)."""


def screened(options: GuidedOptions | None = None) -> GuidedOptions:
    """``options`` (None: a tune's) breeding :data:`POPULATION` x :data:`GENERATIONS` a round:
    about 51 candidates decoded and ranked by the cost model per measurement, 3.7x a tune's 14
    (``sweep(screen=True)``; off by default).

    Why off (``bench/results/sweep.md``, seventeenth pass, h104): a sweep variant gets ~200
    measurements where its cold reference gets 400, so more model-guided evolution per
    measurement might reach the basins the cold line reaches by measuring. Over ResNet-50 b16
    seeds 0-2 and MobileNetV2 b16 seeds 0-1 the screened sweep passed 36 of 40 variants
    (>= 0.99x the cold best) against 37 of 40 without, its best lower on 13 and higher on 22,
    for 1.11x the CPU (not side by side); two of the three misses stayed (ResNet-50
    512K / DDR 13 seed 0 at 13,037.3 us, 1M / DDR 27 seed 2 at 6,975.1). With 384 x 4 (7.3x)
    37 of 40, as main, its best ~0.5 % lower on average, for 1.33x the CPU. A cold
    400-trial tune with it is the better tune on the small-L1, slow-DDR variants (ResNet-50
    384K / DDR 13: 14,142 / 15,073 / 15,222 against 16,230 / 16,396 / 16,433 us at seeds
    0-2), not in general (better on 11 of 24 variants, worse on 7), at ~2x a cold tune's CPU.
    """
    from autotune.sampling._guided import GuidedOptions

    return replace(options or GuidedOptions(), population=POPULATION, generations=GENERATIONS)


def probe_size(trials_per_variant: int) -> int:
    """Measurements every variant gets first: a quarter of its share, at least 16 (or all of it)."""
    return min(trials_per_variant, max(trials_per_variant // 4, 16))


def chunk_size(trials_per_variant: int) -> int:
    """Measurements a variant gets each time it is picked after the probes: a quarter of its
    share, at least 8."""
    return max(trials_per_variant // 4, 8)


def chunk_guided(trials_per_variant: int) -> GuidedOptions:
    """The guided sampler's options in a later chunk: the polish (:mod:`autotune.sampling._polish`)
    after half a chunk without a better best, not a whole tune's 64, and per schedule an
    eighth of a chunk for its one-move ring and three eighths for its second ring
    (:mod:`autotune.sampling._deep`), not 48 each, so both fit in what the chunk leaves it.

    Why: a chunk is a resumed tune of :func:`chunk_size` measurements whose first ones are the
    other variants' bests, and one of them often improves the variant's best, so 64
    measurements without a gain never come within a chunk and the best a variant ends with
    was never polished (ResNet-50 b16, seed 0, h88: 0 polish measurements on 6 of 8
    variants; from L1 384K / DDR 27's final best, 9,592.7 us, a steepest descent over the
    one-move and carried-boundary rings simulated offline reaches 9,473.9 in 4 steps). With
    48 per ring a polished best spent its chunk on the one-move ring: on seed 1, 1M / DDR 13
    had 144 one-move and 0 second-ring polish measurements and ended at 9,407.7 us, while its
    best's carried-boundary ring holds 9,086.4 (8 of its 137 moves are faster, none of the
    256 one-move neighbours). The second ring gets the larger share because that is where the
    one-step gains were (h93, ResNet-50 seed 1, simulated offline): 1M / DDR 13's final best
    (9,169.3 us) has none of its 256 one-move neighbours faster and 94 of them at exactly its
    latency (61 of the 70 rebind moves), while 2 carried-boundary moves reach 9,087.7; with
    12 per ring the sweep measured 24 one-move neighbours of it (23 at 9,169.3) and 12 of
    the second ring, and ended 0.9866 of the cold best.
    """
    from autotune.sampling._guided import GuidedOptions

    c = chunk_size(trials_per_variant)
    return GuidedOptions(polish_after=c // 2, polish_limit=c // 8, polish_deep=c // 4 + c // 8)


def score(latencies: Sequence[float | None], chunk: int, floor: float = 0.0,
          borrowed: int = 0) -> float:
    """Expected relative gain per measurement of a variant with these latencies (in order).

    ``None`` is a failed measurement; ``floor`` the variant's lower bound (0: unknown,
    then the forward term is ``1 / n``). 0 when nothing ran, or when the best is at
    the floor and did not fall over the recent window: the second half of the history,
    or the last ``chunk`` measurements when that is shorter. ``borrowed``: measurements of
    the history that another variant lent it (:func:`lend_to`), not counted in the forward
    term's ``n`` (they were the lender's share).
    """
    best: list[float] = []
    cur = float("inf")
    for lat in latencies:
        if lat is not None and lat > 0:
            cur = min(cur, float(lat))
        best.append(cur)
    ok = [i for i, b in enumerate(best) if b < float("inf")]
    if not ok:
        return 0.0
    now, n = best[-1], len(best)
    back = max(ok[0], (n - 1) // 2, n - 1 - chunk)
    backward = (best[back] - now) / now / max(n - 1 - back, 1)
    forward = max(now - floor, 0.0) / now / max(n - borrowed, 1)
    return ALPHA * backward + (1 - ALPHA) * forward


def stalled(history: Sequence[float | None], trials_per_variant: int,
            tol: float = STALL_TOL) -> bool:
    """Whether a variant whose best after each of its records is ``history`` (the sweep's
    ``_histories``) had a chunk after its probe and its last chunk (:func:`chunk_size`
    records) left its best as it was: gained less than ``tol`` (:data:`STALL_TOL`) of it."""
    c = chunk_size(trials_per_variant)
    if len(history) < probe_size(trials_per_variant) + c:
        return False
    now, before = history[-1], history[-c - 1]
    return now is not None and before is not None and now >= before * (1.0 - tol)


RESTART_TOL = 1e-4
"""A chunk that gained less than this share of the best counts as stalled for a restart
(:func:`later_options`; off by default): a larger share than :data:`STALL_TOL`, since a
restart gives up the polish."""


def later_options(late: GuidedOptions, history: Sequence[float | None], trials_per_variant: int,
                  kick: int = 0, restart: int = 0) -> GuidedOptions:
    """The guided sampler's options of a variant's later chunk (``late``: :func:`chunk_guided`)
    after its records' bests ``history``.

    ``restart`` > 0 and the last chunk gained less than :data:`RESTART_TOL`: a restart
    elsewhere, evolution bred from the best measured candidates that differ from the best in
    at least ``restart`` parameters (``GuidedOptions.apart``) and no polish (which would climb
    from the best again). Else ``kick`` > 0 and the last chunk left the best as it was: the
    polish kicked (``polish_kick``). Else ``late``. (A gain below :data:`STALL_TOL` is none.)

    Why (``bench/results/sweep.md``, twenty-second pass): the sweep's one miss (ResNet-50 b16
    seed 0, L1 384K / DDR 27, 9,518.1 us, bar 9,435.8) is a basin; seed 2's sweep reached
    9,270.1 from the DDR-13 sibling's best, which seed 0's log does not hold (no record of
    any variant, fitted, is faster there than its best). Offline, 150 more measurements
    from that best with ``apart=20`` and no polish reached 9,478.3 and 9,507.9 (sampler
    seeds 0 and 1), the chunk as it is 9,510.2 (no polish) and 9,514.2 (50, polished). In the
    sweep (``restart=20``) the miss stayed (9,518.2), and MobileNetV2 seed 0's 384K / DDR 27 lost
    the pass its kicked chunks had found (1,654.0 against 1,634.6): off by default.
    """
    if restart > 0 and stalled(history, trials_per_variant, RESTART_TOL):
        return replace(late, apart=restart, polish_after=-1)
    if kick > 0 and stalled(history, trials_per_variant):
        return replace(late, polish_kick=kick)
    return late


TWIN = 1e-4
"""Relative difference of two variants' bests within which :func:`lend_to` takes them for one
basin (the same schedule, or one as fast)."""


def lend_to(pick: str, history: Sequence[float | None], below: Sequence[str],
            histories: Mapping[str, Sequence[float | None]], trials_per_variant: int) -> str | None:
    """The variant ``pick``'s chunk goes to instead, or None (it keeps it).

    ``pick``'s chunk is lent when its last chunk left its best as it was (``history``: its
    best after each of its records, as the allotment has it) and a variant it dominates
    (``below``: those whose every schedule fits ``pick``, the most constrained first) has a
    best within :data:`TWIN` of its own: the two sit in one basin, and what the smaller one
    finds fits the larger (its next chunk measures it: the other variants' bests are its warm
    seeds), while the larger's finds may overflow the smaller. The first such variant takes
    the chunk (its own search, kicked when it too stalled: ``sweep(kick=...)``).

    Why (``bench/results/sweep.md``, twenty-first pass): on MobileNetV2 b16 seed 0, L1 512K and
    384K at DDR 27 both sat at 1,663.5 us from their 54th measurement for 150 more each; the
    512K variant passed its bar (cold 1,674.6) and the 384K one missed its own (cold 1,633.2,
    bar 1,649.7), which kicks reached offline only after 150 measurements from its 101st (h111).
    """
    if not below or not stalled(history, trials_per_variant):
        return None
    mine = history[-1]
    if mine is None:
        return None
    for k in below:
        h = histories.get(k, ())
        theirs = h[-1] if h else None
        if theirs is not None and abs(theirs - mine) <= TWIN * mine:
            return k
    return None


def allot(histories: Mapping[str, Sequence[float | None]], keys: Sequence[str],
          trials_per_variant: int, floors: Mapping[str, float] | None = None,
          reserve: int = 0, below: Mapping[str, Sequence[str]] | None = None
          ) -> tuple[dict[str, int], list[str]]:
    """Each variant's measurement budget, and the chunks in the order they were handed out.

    Args:
        histories: Variant key -> its measured latencies in log order (None: failed).
        keys: The feasible variants, in the tuning order.
        trials_per_variant: The average budget per variant.
        floors: Variant key -> its lower bound (missing: unknown).
        reserve: Measurements of the total the chunks leave for later (the sweep's final
            cross-round: :func:`cross_reserve`).
        below: Variant key -> the keys of the variants it dominates, the most constrained
            first: a picked variant may lend its chunk to one of them (:func:`lend_to`); the
            lender's score then counts the chunk as measurements without a gain, and the
            borrower's forward term does not count it (:func:`score`'s ``borrowed``: a chunk
            lent is the lender's share, so the borrower keeps its own chunks). None: no
            lending (each chunk to the variant picked).

    Returns ``(budget per key, the key of each chunk handed out)``. The replay stops
    at the first variant whose log does not hold its allotment yet: that is the one
    to measure next (the caller tunes it to its budget and calls again).
    """
    probe, chunk = probe_size(trials_per_variant), chunk_size(trials_per_variant)
    budget = {k: probe for k in keys}
    handed: list[str] = []
    total = trials_per_variant * len(keys) - reserve
    if any(len(histories.get(k, ())) < probe for k in keys):
        return budget, handed
    def spent() -> int:
        return sum(max(budget[k], len(histories.get(k, ()))) for k in keys)

    lent = dict.fromkeys(keys, 0)
    borrowed = dict.fromkeys(keys, 0)

    def seen(k: str) -> list[float | None]:
        """``k``'s history as the allotment has it: its budget's records, then a chunk it
        lent counted as records without a gain."""
        h = list(histories.get(k, ()))[:budget[k]]
        return h + h[-1:] * lent[k] if h else h

    while spent() + chunk <= total:
        scores = {k: score(seen(k), chunk, (floors or {}).get(k, 0.0), borrowed[k]) for k in keys}
        pick = max(keys, key=lambda k: (scores[k], -budget[k]))
        if scores[pick] <= 0.0:
            break
        to = None if not below else lend_to(
            pick, seen(pick), [k for k in below.get(pick, ()) if k in budget],
            {k: seen(k) for k in keys}, trials_per_variant)
        if to is not None:
            lent[pick] += chunk
            borrowed[to] += chunk
            pick = to
        budget[pick] += chunk
        handed.append(pick)
        if len(histories.get(pick, ())) < budget[pick]:
            break
    return budget, handed

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

``backward`` the relative gain over its last chunk per measurement, ``forward``
the relative gain since its first successful measurement per measurement (the
average rate so far: Ansor's optimistic guess; its physical-floor cap is left out,
since the roofline floor does not depend on the swept capacities and so does not
tell the variants apart: 818 µs on every L1 size of MobileNetV2 b16). A variant
whose probe found nothing better than its first schedule scores 0 and gets no
more; when every variant scores 0 the rest of the budget is not spent.

The allotment is a function of the log alone (:func:`allot` replays it from each
variant's first records), so a killed sweep re-run hands out the same chunks and
measures nothing twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["ALPHA", "allot", "chunk_size", "probe_size", "score"]

ALPHA = 0.2
"""Weight of the last chunk's gain against the average gain (Ansor's ``alpha``)."""


def probe_size(trials_per_variant: int) -> int:
    """Measurements every variant gets first: a quarter of its share, at least 16 (or all of it)."""
    return min(trials_per_variant, max(trials_per_variant // 4, 16))


def chunk_size(trials_per_variant: int) -> int:
    """Measurements a variant gets each time it is picked after the probes: a quarter of its
    share, at least 8."""
    return max(trials_per_variant // 4, 8)


def score(latencies: Sequence[float | None], chunk: int) -> float:
    """Expected relative gain per measurement of a variant with these latencies (in order).

    ``None`` is a failed measurement. 0 when nothing ran or nothing improved on the
    first schedule that ran.
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
    first, now, n = best[ok[0]], best[-1], len(best)
    forward = (first - now) / now / max(n - ok[0], 1)
    back_at = best[max(ok[0], n - 1 - chunk)]
    backward = (back_at - now) / now / max(min(chunk, n - 1 - ok[0]), 1)
    return ALPHA * backward + (1 - ALPHA) * forward


def allot(histories: Mapping[str, Sequence[float | None]], keys: Sequence[str],
          trials_per_variant: int) -> tuple[dict[str, int], list[str]]:
    """Each variant's measurement budget, and the chunks in the order they were handed out.

    Args:
        histories: Variant key -> its measured latencies in log order (None: failed).
        keys: The feasible variants, in the tuning order.
        trials_per_variant: The average budget per variant.

    Returns ``(budget per key, the key of each chunk handed out)``. The replay stops
    at the first variant whose log does not hold its allotment yet: that is the one
    to measure next (the caller tunes it to its budget and calls again).
    """
    probe, chunk = probe_size(trials_per_variant), chunk_size(trials_per_variant)
    budget = {k: probe for k in keys}
    handed: list[str] = []
    total = trials_per_variant * len(keys)
    if any(len(histories.get(k, ())) < probe for k in keys):
        return budget, handed
    spent = probe * len(keys)
    while spent + chunk <= total:
        scores = {k: score(list(histories.get(k, ()))[:budget[k]], chunk) for k in keys}
        pick = max(keys, key=lambda k: (scores[k], -budget[k]))
        if scores[pick] <= 0.0:
            break
        budget[pick] += chunk
        spent += chunk
        handed.append(pick)
        if len(histories.get(pick, ())) < budget[pick]:
            break
    return budget, handed

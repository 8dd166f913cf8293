"""Which of the guided sampler's two islands breeds the next round: win-stay, lose-shift.

With borrowing (:mod:`autotune.sampling._guided`'s module doc), a round breeds either
from the borrowed line (the best of everything, ranked by the transferred model) or
from the own line (ranked as a cold tune ranks). Strict alternation gave each half
the rounds whatever they delivered: it freed MobileNetV2's small-L1 variants from
their borrowed seeds' basin, and cost ResNet-50's, where the borrowed line was the
one finding the best (``bench/results/sweep.md``, 2026-11-26, fourth pass). So the line
whose last round moved the best measured speed by :data:`DELIVERED` or more keeps
the next round; a round that did not hands it to the other line. The first round is
the borrowed line's; when neither line delivers they alternate (half the rounds are a
cold tune's search, as before).
"""

from __future__ import annotations

__all__ = ["DELIVERED", "LineTurns"]

DELIVERED = 0.005
"""A round delivered if the best measured speed grew by this share since its request."""


class LineTurns:
    """The line of each round, from the best measured speed when each is requested."""

    def __init__(self) -> None:
        self.last_own: bool | None = None  # the line of the last round (None: no round yet)
        self.best_at = 0.0  # the best speed measured when it was requested

    def next(self, best: float) -> bool:
        """Whether the round requested now, with ``best`` the best speed measured so far
        (higher = faster; 0: none), is the own line's."""
        delivered = best > self.best_at * (1.0 + DELIVERED)
        last, self.best_at = self.last_own, best
        own = False if last is None else (last if delivered else not last)
        self.last_own = own
        return own

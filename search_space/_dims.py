"""The parameters (dimensions) of a space, their choices and how ties share them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

SCOPE_POLICIES = ("L1", "LLB", "DDR", "LLB>L1", "DDR>L1", "LLB/2")
"""Scope policy of a group's chunks, by wave (the chunks one consumer chunk reads):

* ``L1`` / ``LLB`` / ``DDR``: every chunk there;
* ``LLB>L1`` / ``DDR>L1``: the first ``w-1`` chunks of each wave of ``w`` spill to
  LLB / DDR, the last stays in L1 for its consumer (the guide's ResNet-50 plan);
* ``LLB/2``: the first half of each wave in LLB, the rest in L1.
"""
TRANSFER_SCOPES = ("auto", "L1", "LLB", "DDR")
"""Scope of the split/concat transfers of a group's output (``auto``: the slowest source)."""
MODES = ("whole", "anchors", "ops")
"""How a block becomes groups: one group, the anchor partition, or one group per op."""
ORDERS = ("depth", "breadth")
GRANULARITIES = ("1/4", "1/8", "1/16", "1/32", "0")
"""Share of the cut points that are group boundaries: a cut point is one when its
rank (``cut@k``, 0..31) is below ``32 * granularity``. Uniform ranks and a uniform
granularity give blocks of every size, coarse more often than fine (the mean share
is 0.09); any set of boundaries is a point of the space (ranks 0 at the boundaries,
31 elsewhere, any granularity but ``0``)."""
RANKS = 32
"""Choices of a ``cut`` parameter at a single-tensor cut point; a cut point where
several tensors cross (one made since the previous cut point) has ``2 * RANKS``, so
at every granularity it is a boundary half as often: the blocks O3 and the guide cut
stay as likely as before the wider space, and the finer ones are there to find."""
CUT_BELOW = {"1/4": 8, "1/8": 4, "1/16": 2, "1/32": 1, "0": 0}
LOOKAHEADS = (0, 1, 2, 3)
SLOT_KINDS = ("samples", "cpp", "parts", "perm", "spread", "xscope")

KIND_HELP = {
    "batch": "batch size (throughput objective)",
    "order": "depth-first waves or breadth-first",
    "lookahead": "chunks a producer may run ahead (depth-first)",
    "granularity": "share of the cut points that are group boundaries",
    "cut": "rank of a single-tensor cut point (a boundary when below 32 x granularity)",
    "mode": "block as one group, its anchor partition, or one group per op",
    "samples": "samples per core part (split = batch / (samples x parts), a divisor)",
    "cpp": "cores per part (cores sharing one part's samples)",
    "parts": "core parts a chunk's samples are spread over",
    "perm": "which cores: a rotation of the cluster, or reuse of the producer's cores",
    "spread": "successive chunks on successive core sets (when a chunk uses part of the cluster)",
    "xscope": "scope of the split/concat transfers of a group's output",
    "scope": "scope policy of a group's chunk outputs",
}


@dataclass(frozen=True)
class Dim:
    """One parameter: its stable name, kind, choices and where it applies.

    Attributes:
        name: Stable name (Optuna parameter name), e.g. ``samples@18``.
        kind: One of the keys of :data:`KIND_HELP`.
        choices: The values it takes (ints or strings).
        at: The op index (slot, scope, mode) or segment boundary op (cut) it belongs
            to; ``-1`` for global parameters.
    """

    name: str
    kind: str
    choices: tuple[Any, ...]
    at: int = -1

    def to_json(self) -> dict[str, Any]:
        """Keyed JSON."""
        return {"name": self.name, "kind": self.kind, "choices": list(self.choices), "at": self.at}


def divisors(n: int) -> list[int]:
    """Divisors of ``n``, ascending."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def perm_choices(cores: int) -> tuple[str, ...]:
    """``rot0`` .. ``rot{cores-1}``, the interleaved orders ``il1`` .. (:func:`interleaved`),
    then ``reuse``.

    ``reuse`` stays last: a projection takes the first choice that gives a group's
    binding, and every other choice gives its order whatever the producer's.
    """
    return (*(f"rot{k}" for k in range(cores)),
            *(f"il{k}" for k in range(1, len(interleaved(cores)) + 1)), "reuse")


@lru_cache(maxsize=64)
def interleaved(cores: int) -> tuple[tuple[int, ...], ...]:
    """The guide's interleaved core orders: the identity unshuffled 1, 2, ... times.

    :func:`unshuffle` with ``r = 2`` applied ``k`` times to ``[0..n-1]``, for
    ``k = 1 .. log2(n)`` (a power-of-two cluster; none otherwise). For 8 cores:
    ``il1 = [1,3,5,7,0,2,4,6]``, ``il2 = [3,7,2,6,1,5,0,4]``, ``il3 = [7,6,...,0]``,
    the orders the guide's ResNet-50 plan binds its groups to, group after group.
    They are choices of their own, so a group may take one whatever its producer's
    cores (``reuse`` reaches them only along a chain of gathering consumers).
    """
    out: list[tuple[int, ...]] = []
    if cores < 2 or cores & (cores - 1):
        return ()
    perm = tuple(range(cores))
    for _ in range(cores.bit_length() - 1):
        perm = unshuffle(perm, 2)
        out.append(perm)
    return tuple(out)


@lru_cache(maxsize=1024)
def perm_order(choice: str, cores: int) -> tuple[int, ...]:
    """The core order of a ``perm`` choice other than ``reuse``: ``rotK`` or ``ilK``
    (remembered: decoding asks for it once per group)."""
    if choice.startswith("il"):
        return interleaved(cores)[int(choice[2:]) - 1]
    k = int(choice[3:])
    return tuple((k + i) % cores for i in range(cores))


@lru_cache(maxsize=4096)
def unshuffle(perm: tuple[int, ...], r: int) -> tuple[int, ...]:
    """The guide's "scheme 2" core reuse: ``perm[r-1::r] + ... + perm[0::r]``.

    When a consumer chunk gathers ``r`` producer chunks, giving the earlier chunks'
    samples the odd positions of the last (L1-resident) chunk's cores and that
    chunk's samples the even ones keeps every resident sample on a core it is
    already on. For ``r = 2`` this turns ``[0..7]`` into ``[1,3,5,7,0,2,4,6]``,
    that into ``[3,7,2,6,1,5,0,4]``, and that into ``[7,6,5,4,3,2,1,0]``: the
    guide's ResNet-50 bindings, group after group.
    """
    if r <= 1:
        return perm
    out: list[int] = []
    for j in range(r - 1, -1, -1):
        out.extend(perm[j::r])
    return tuple(out)

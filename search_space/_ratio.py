"""One chunk shape for every chunk shape with the same working sets (issue 20: fewer misses).

A group chunk's working set (:func:`compiler.capacity.chunk_working_set`) reads its
samples per part ``spp`` and cores per part ``cpp`` only as ``ceil(x * spp / cpp)`` (the
profile's peak, :func:`compiler.footprint.peak_of`; every stream buffer's tile) unless a
halo term (a windowed op whose rows are cut inside a sample: ``cut_sides(spp, cpp)``) or
an attention term (``cpp > 1``) is added. Without those terms, (spp, cpp) and
(spp / d, cpp / d), d = gcd(spp, cpp), have the same working sets: ResNet-50 b16's
2 samples on 2 cores and 8 on 8 are 1 on 1. :func:`shape_key` names that shape, so the
fit (``Decoding.fits_l1``) and the C walk's working-set tables (``_ccore._work``)
computed for one shape serve its equals: ~27 % of ResNet-50's new fits at ``--warm 100``
found there (6.5 % of BERT-large's, whose attention sets keep their own shapes).
The property is checked against ``chunk_working_set`` itself
(``tests/search_space/test_ratio.py``).
"""

from __future__ import annotations

from math import gcd
from typing import Any

from compiler.capacity import _facts, cut_sides


def shape_key(mem: Any, info: Any, spp: int, cpp: int) -> tuple[int, int]:
    """(spp, cpp) reduced by their gcd when the op set's working sets at that shape add no
    halo or attention term (the same condition as ``compiler.capacity._work``'s), else
    (spp, cpp) unchanged. ``info`` is the op set's ``GroupInfo``; its facts' two flags
    are kept in its cache."""
    d = gcd(spp, cpp)
    if d <= 1:
        return spp, cpp
    flags = info.cache.get("cterms")
    if flags is None:
        f = _facts(mem, info.ops)
        flags = info.cache["cterms"] = (bool(f.windowed), bool(f.attention))
    windowed, attention = flags
    if (windowed and cut_sides(spp, cpp)) or (attention and cpp > 1):
        return spp, cpp
    return spp // d, cpp // d

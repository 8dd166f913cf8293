"""Search space of graph schedules (Graph + Target + batch -> candidate GraphSchedules).

Example:
    >>> from search_space import build_space
    >>> space = build_space(graph, Target.default(), 16)
    >>> s = space.sample(np.random.default_rng(0))      # or space.suggest(trial)
    >>> space.decode(space.encode(s)).structural_key() == s.structural_key()
    True
    >>> space.precheck(s).ok, space.size(), space.project(o3).reason

See :mod:`search_space._space` for the parameters and ``search_space/README.md``.
"""

from search_space._dims import Dim
from search_space._space import (
    Check,
    Projection,
    Space,
    SpaceError,
    SpaceOptions,
    build_space,
    build_spaces,
)

__all__ = [
    "Check",
    "Dim",
    "Projection",
    "Space",
    "SpaceError",
    "SpaceOptions",
    "build_space",
    "build_spaces",
]

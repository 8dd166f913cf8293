"""``Space._decode_free``'s canonical vector and parameters read (what ``encode`` returns
for a decoded schedule and the neighbourhood moves read): the parameters the decode read,
sorted, and the vector with every other entry 0, as int16, whatever the input's integer
type. The parameters are marked in a mask (not sorted: ~30 us of a BERT-large candidate);
this checks them against the recorder's own record."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.target import Target
from search_space import build_space
from tests.search_space.conftest import recorded, small_graph

_SPACES: dict[str, Any] = {}


def _space_of(key: str) -> Any:
    if key not in _SPACES:
        _SPACES[key] = build_space(small_graph(key), Target.default())
    return _SPACES[key]


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1), key=st.sampled_from(["tiny_cnn", "bert2"]),
       dtype=st.sampled_from([np.int16, np.int64, np.int32]), uniform=st.booleans())
def test_canonical_vector_and_read_parameters(seed: int, key: str, dtype: Any, uniform: bool,
                                              ) -> None:
    space = _space_of(key)
    vec = space.sample_vectors(np.random.default_rng(seed), 1, uniform)[0].astype(dtype)
    with recorded() as seen:
        _, canon, active = space._decode_free(vec)
    want = seen[-1].read()
    assert active == want and type(active) is list and all(type(a) is int for a in active)
    assert canon.dtype == np.int16 and canon.shape == (space.dimension,)
    ref = np.zeros(space.dimension, dtype=np.int16)
    ref[want] = vec[want]
    assert (canon == ref).all()


def test_params_of_refuses_a_vector_of_another_length() -> None:
    """``params_of`` (public) checks the length as ``decode`` does: a SpaceError naming it."""
    from search_space import SpaceError

    space = _space_of("tiny_cnn")
    vec = space.sample_vectors(np.random.default_rng(0), 1)[0]
    assert space.params_of(vec)
    for bad in (np.concatenate([vec, [0]]), vec[:-1]):
        with pytest.raises(SpaceError, match="entries"):
            space.params_of(bad)

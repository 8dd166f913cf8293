"""An L1 overflow's halo, window and attention parts, with and without the Python analysis.

When the compiled walk overflows L1, the issue lists the overflowing chunk's working set
and its halo terms (:func:`compiler.capacity.working_set_entries`), which
:func:`compiler.capacity.chunk_working_set` keeps in its facts' ``halo``.
:func:`search_space._crows.l1_halo` answers (0.0, 0.0, 0.0) without that Python analysis
when the op set's shape-independent parts show no term can be there, and computes them in C
(``ws_halo`` in ``_cwalk.c``) from the shape's C definition otherwise. Here it is compared,
for every group of sampled decodes and every mask, output and held flag, with the
reference; the cases must include answers given without asking, and terms that are there
through a window alone (so a check that forgot the windows fails), through a halo and
through attention.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from compiler.capacity import _facts, chunk_working_set
from compiler.target import Target
from search_space import _build, _ccore, _cderive, _crows, build_space
from search_space._cplan import streamed_of
from search_space._space import _Recorder
from tests.search_space.conftest import small_graph
from tests.sim.conftest import zoo_graph

pytestmark = pytest.mark.skipif(
    not _cderive.available(),
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")


def _reference(dec: Any, info: Any, names: tuple[str, ...], mask: int, off: bool, held: bool,
               spp: int, cpp: int) -> tuple[float, float, float]:
    """What the walk read before: chunk_working_set, then its facts' halo entry."""
    wkey = (streamed_of(names, mask), off, held, spp, cpp)
    chunk_working_set(dec.mem, info.ops, *wkey)
    return _facts(dec.mem, info.ops).halo.get(wkey, (0.0, 0.0, 0.0))  # type: ignore[no-any-return]


def _walked(space: Any, vec: np.ndarray) -> Any:
    rec = _Recorder(vec[space.rep].tolist(), space._rep_list)
    dec = _build.decode_groups(space, rec)
    _build.walk_scopes(dec, rec)
    return dec


_WANT = {"tiny_cnn": {"halo"}, "resnet18": {"window alone", "halo"}, "bert2": {"attention"}}


@pytest.mark.parametrize("key", ["tiny_cnn", "resnet18", "bert2"])
def test_l1_halo_is_the_reference(key: str) -> None:
    """l1_halo equals chunk_working_set's halo entry for every group, shape and mask; the
    terms the model has are met (ResNet-18's streamed windows: window rows alone)."""
    t = Target.default()
    graph = zoo_graph(key, 2) if key == "resnet18" else small_graph(key)
    space = build_space(graph, t)
    rng = np.random.default_rng(11)
    free0, c0 = _crows.HALO["free"], _crows.HALO["c"]
    walk = _ccore._load()
    seen: set[str] = set()
    compared = 0
    for vec in space.sample_vectors(rng, 3 if key == "resnet18" else 8):
        dec = _walked(space, vec)
        for gr in dec.groups:
            info = gr.info
            parts = info.shared.get("cws")
            if parts is None:
                continue
            names = tuple(t for t in info.inputs if t in info.streamable)
            for spp, c in {(gr.samples // gr.parts, gr.cores // gr.parts), (1, 2), (1, 8), (8, 1)}:
                for mask in range(1 << len(names)):
                    for off in (False, True):
                        for held in (False, True):
                            want = _reference(dec, info, names, mask, off, held, spp, c)
                            got = _crows.l1_halo(dec, info, names, mask, off, held, spp, c)
                            assert got == want, (gr.name, names, mask, off, held, spp, c)
                            # the terms computed in C (ws_halo) from the shape's C definition
                            got = _crows.l1_halo(dec, info, names, mask, off, held, spp, c, walk,
                                                 _ccore._ws_at)
                            assert got == want, ("C", gr.name, names, mask, off, held, spp, c)
                            compared += 1
                            if want[1] > 0 and not want[0] and not want[2]:
                                seen.add("window alone")
                            if want[0] > 0:
                                seen.add("halo")
                            if want[2] > 0:
                                seen.add("attention")
    assert compared > 100
    assert _crows.HALO["free"] > free0  # answered without the Python analysis
    assert _crows.HALO["c"] > c0  # computed in C
    assert seen >= _WANT[key]

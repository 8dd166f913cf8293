"""A group's chunk-DAG row made in C from its op set's kept inputs and outputs.

``cdag_rows`` (``_cshape.c``) given the space's tensor codes makes a group's missing row
(``info.cache[("cdag", name, split)]``) itself when its op set's inputs and outputs are kept
(``"cdag.io"``) and its result has a code, as :func:`search_space._cderive._group_row` makes
it; else it calls that function back. Here: the rows equal ``_group_row``'s (the same
objects but the new node tuples), no callback for them, and the callback still made when
the kept parts are missing.
"""

from __future__ import annotations

from typing import Any

import pytest

from compiler.target import Target
from search_space import _build, _ccore, _cderive, build_space
from tests.search_space.conftest import group_decodes, small_graph

pytestmark = pytest.mark.skipif(
    not _cderive.available() or _ccore._glue() is None,
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")


def _miss(dec: Any, codes: dict[str, int], calls: list[Any], io: Any = None) -> Any:
    """cdag_rows' callback: _group_row, each call noted (with ``io`` put back first)."""
    def miss(gr: Any) -> Any:
        calls.append(gr)
        if io is not None:
            gr.info.cache["cdag.io"] = io
        return _cderive._group_row(dec, gr, codes)
    return miss


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2"])
def test_chunk_dag_rows_from_kept_io_are_group_rows(key: str) -> None:
    glue = _ccore.load_extension("_cshape").cdag_rows
    space = build_space(small_graph(key), Target.default())
    made = 0
    for rec, dec in group_decodes(space, 13, 6):
        _build.walk_scopes(dec, rec)
        codes = _ccore.tensor_codes(space)
        want = {}
        for gr in dec.groups:  # _group_row's rows, then dropped (the kept io stays)
            k = ("cdag", gr.name, gr.split)
            want[gr.name] = _cderive._group_row(dec, gr, codes)
            del gr.info.cache[k]
        calls: list[Any] = []
        rows, gout = glue(dec.groups, _miss(dec, codes, calls), codes)
        assert not calls  # every op set's io was kept: no callback
        for gr, row, out in zip(dec.groups, rows, gout, strict=True):
            w = want[gr.name]
            got = gr.info.cache[("cdag", gr.name, gr.split)]  # kept as _group_row keeps it
            assert got == w and got[1] is w[1] and got[2] is w[2] and got[3] is w[3]
            assert row == (*w[:4], gr.binds) and out == w[4]
            made += 1
        # without the kept io, the callback makes the row
        first = dec.groups[0]
        del first.info.cache[("cdag", first.name, first.split)]
        io = first.info.cache.pop("cdag.io")
        calls.clear()
        glue(dec.groups[:1], _miss(dec, codes, calls, io), codes)
        assert calls == [first]
    assert made > 10

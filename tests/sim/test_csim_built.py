"""Where a C compiler is on PATH, ``pip install -e .`` must have built the simulator's timed
step (``sim/_csim.c``, optional in setup.py like the search core's parts, so a part that
fails to compile would otherwise leave every compiled-step test skipped)."""

from __future__ import annotations

import importlib

import pytest

from sim import _ctime
from tests.search_space.test_built import _compiler


@pytest.mark.skipif(_compiler() is None, reason="no C compiler on PATH: the Python step is used")
def test_the_compiled_simulator_step_is_built() -> None:
    try:
        mod = importlib.import_module("sim._csim")
    except ImportError as exc:
        pytest.fail(f"sim._csim was not built although {_compiler()} is on PATH ({exc}); see "
                    "the compiler's errors in: pip install -e . -v")
    for need in _ctime.NEEDS:
        assert hasattr(mod, need), f"sim._csim is an older build (no {need})"

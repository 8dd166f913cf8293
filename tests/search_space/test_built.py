"""Where a C compiler is on PATH, ``pip install -e .`` must have built every part of the
compiled search core: each extension is ``optional`` in setup.py (so a machine without a
compiler still installs), which also lets a part that fails to compile leave the build
green and every compiled-only test skipped. This test is what fails then."""

from __future__ import annotations

import importlib
import shutil
import sysconfig

import pytest

from search_space import _ccore

PARTS = ("_cwalk", "_cdag", "_cpart", "_cshape", "_canalyse", "_ccodes")


def _compiler() -> str | None:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc)


@pytest.mark.skipif(_compiler() is None, reason="no C compiler on PATH: the Python decoder is used")
@pytest.mark.parametrize("name", PARTS)
def test_every_part_of_the_compiled_core_is_built(name: str) -> None:
    try:
        mod = importlib.import_module(f"search_space.{name}")
    except ImportError as exc:
        pytest.fail(f"search_space.{name} was not built although {_compiler()} is on PATH "
                    f"({exc}); see the compiler's errors in: pip install -e . -v")
    for need in _ccore._NEEDS.get(name, ()):
        assert hasattr(mod, need), f"search_space.{name} is an older build (no {need})"

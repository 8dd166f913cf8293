"""Hostile inputs to the compiled search core run in a child process: a crash there (a
segfault) fails the test instead of the test run.

``run_child`` runs a script from the project root; scripts import ``expect`` from here
(``sys.path`` holds ``.`` in them) to check that a call raises.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_child(script: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``script`` run by this Python in a child process from the project root."""
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def expect(exc: type[BaseException], f: Any, *a: Any) -> None:
    """``f(*a)`` raises ``exc`` (an AssertionError naming the call if it returns)."""
    try:
        f(*a)
    except exc:
        return
    raise AssertionError(("no", exc, a))


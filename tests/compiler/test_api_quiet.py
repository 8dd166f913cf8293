"""The Python API is as quiet as the CLI: TVM's native notes go to the log (issue 21)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_import_through_the_api_prints_nothing_on_stderr() -> None:
    # DeepFM's Gather becomes a `take` that TVM's FoldConstant builds, printing
    # "Warning: Fast mode segfaults when there are out-of-bounds indices" to fd 2.
    code = ("from compiler import zoo; from compiler.model import Model; "
            "m = Model(zoo.build('deepfm', batch=2, weights='random'), 'deepfm'); "
            "print(len(m.graph.ops), m.mod is not None)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["29", "True"]
    assert "Fast mode" not in r.stderr and r.stderr == "", r.stderr

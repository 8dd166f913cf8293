"""The console script ends its process as soon as its output is out (autotune.cli._exit_now).

It skips only the interpreter's teardown: the exit status, everything written to stdout
and stderr, and the exit handlers are as with a normal exit (``GRAPHTUNE_SLOW_EXIT=1``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

GRAPHTUNE = str(Path(sys.executable).with_name("graphtune"))


def _run(args: list[str], slow: bool, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("GRAPHTUNE_SLOW_EXIT", None)
    if slow:
        env["GRAPHTUNE_SLOW_EXIT"] = "1"
    return subprocess.run([GRAPHTUNE, *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


@pytest.mark.parametrize("args", [["zoo", "--list"], ["log", "show", "missing.jsonl"],
                                  ["tune", "missing.onnx", "--trials", "1", "--log", "x.jsonl"]])
def test_fast_exit_keeps_status_and_output(args: list[str], tmp_path: Path) -> None:
    fast, slow = _run(args, False, tmp_path), _run(args, True, tmp_path)
    assert fast.returncode == slow.returncode
    assert fast.stdout == slow.stdout
    assert fast.stderr == slow.stderr
    if fast.returncode:
        assert fast.stderr.startswith("graphtune: error: ") and fast.stderr.count("\n") == 1


def test_piped_output_is_complete(tmp_path: Path) -> None:
    """A long output into a pipe is all there: the streams are flushed before the process ends."""
    out = _run(["zoo", "--list"], False, tmp_path).stdout
    assert out.endswith("\n") and len(out.splitlines()) >= 10

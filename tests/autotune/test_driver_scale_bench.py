"""``bench/driver_scale.py --quick`` runs end to end and writes its table, CSV and plot.

Slow (a Ray start and three short tuning jobs): ``make test-slow``. It checks the bench's
plumbing and that its figures are sane, never a speed (the machine may be busy).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_driver_scale_quick_writes_its_results(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "driver_scale.py"), "--quick", "--delay", "0.05",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    rows = list(csv.DictReader((tmp_path / "driver_scale.csv").open()))
    scale = [r for r in rows if r["part"] == "workers"]
    assert [int(r["workers"]) for r in scale] == [1, 2, 4]
    for r in scale:
        ideal = float(r["ideal_per_s"])
        assert ideal == pytest.approx(int(r["workers"]) / 0.05)
        # Sleeping measurers cannot beat their own pace (small slack: a window of few batches).
        assert 0 < float(r["measurements_per_s"]) <= 1.15 * ideal
        assert int(r["measured"]) == int(r["workers"]) * 4 * 3
        # The CPU split covers every measurement (first batch sent to the pool's close),
        # and its parts add up to its total; the workers' measure calls cost something.
        split = json.loads(r["cpu_split_ms_per_measurement"])
        assert split["measurements"] == int(r["measured"])
        parts = [v for k, v in split.items() if k not in ("total", "measurements", "held %")]
        assert len(parts) == 7 and sum(parts) == pytest.approx(split["total"])
        assert split["worker measure"] > 0 and split["Ray services"] >= 0
        assert 0 <= split["held %"] <= 100
    (drv,) = [r for r in rows if r["part"] == "driver"]
    assert int(drv["study_trials"]) == 200 and float(drv["driver_ms_per_trial"]) > 0
    table = (tmp_path / "driver_scale.md").read_text()
    assert "| 4 |" in table and "efficiency" in table and "cores allow" in table
    assert (tmp_path / "driver_scale.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

"""A tune's log does not depend on what ran before it in the same process.

The same seed must give the same tune whether the target is tuned alone (``graphtune tune
--target``, a fresh process) or after other targets in one process (``graphtune sweep
--cold``, ``bench/sweep.py --runs cold``): no process-wide memo, RNG, interning
order or cache shared across targets may steer the search. Measured in-process
(``workers=0``), where the seed fixes the whole job.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import onnx
from click.testing import CliRunner

from autotune import RunOptions, SearchOptions, tune
from autotune.cli import main
from autotune.whatif._nearest import tuning_order
from autotune.whatif._targets import Variant, make_variants, parse_set, target_toml
from compiler.graph import Graph
from compiler.model import Model
from compiler.target import Target

ROOT = Path(__file__).resolve().parents[2]
TRIALS = 48  # past the cost model's first retrainings and its early-stopping split (40 rows)
SEED = 3


def _variants() -> list[Variant]:
    return make_variants(Target.default(), [parse_set("l1.data_bytes=64K,1M"),
                                            parse_set("ddr.bytes_per_cycle=13,27")])


def _records(log: Path, chip: str | None = None) -> list[dict[str, Any]]:
    """The log's records without their times (and checksums), of one target if given."""
    out = []
    for line in log.read_text().splitlines():
        r = json.loads(line)
        if chip is not None and r["target"]["chip"] != chip:
            continue
        r["prov"].pop("time_unix_s")
        r.pop("crc32")
        out.append(r)
    return out


def _tune(graph: Graph, variant: Variant, log: Path) -> None:
    tune([graph], trials=TRIALS, log=log, target=variant.target,
         search=SearchOptions(seed=SEED), run=RunOptions(workers=0, curve=False))


def _graph(onnx_path: Path) -> Graph:
    """A new graph object (its own per-graph memos, :mod:`compiler.memo`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(onnx.load(str(onnx_path)), name="tiny").graph


def test_a_tune_after_other_targets_gives_the_log_it_gives_alone(tiny_onnx: Path,
                                                                   tmp_path: Path) -> None:
    """B on a graph of its own, against the other variants then B on one shared graph (what a
    sweep does): record for record equal. A memo of the graph that leaves the target out of
    its key, or a process-wide state the other tunes move, makes them differ."""
    vs = _variants()
    b = vs[0]
    _tune(_graph(tiny_onnx), b, tmp_path / "alone.jsonl")
    shared = _graph(tiny_onnx)
    for i, v in enumerate(vs[1:]):
        _tune(shared, v, tmp_path / f"other{i}.jsonl")
    _tune(shared, b, tmp_path / "after.jsonl")
    alone = _records(tmp_path / "alone.jsonl")
    assert len(alone) == TRIALS
    assert alone == _records(tmp_path / "after.jsonl")


def test_a_cold_sweep_gives_the_last_variant_its_lone_tune(tiny_onnx: Path, tmp_path: Path) -> None:
    """``graphtune sweep --cold`` (every variant in one process and one log, as
    ``bench/sweep.py --runs cold``) against ``graphtune tune --target`` of the variant it tuned
    last, in a fresh interpreter: the same records."""
    vs = _variants()
    log = tmp_path / "cold.jsonl"
    res = CliRunner().invoke(main, [
        "sweep", str(tiny_onnx), "--set", "l1.data_bytes=64K,1M", "--set", "ddr.bytes_per_cycle=13,27",
        "--allocate", "equal", "--trials-per-variant", str(TRIALS), "--seed", str(SEED),
        "--workers", "0", "--cold", "--log", str(log), "-o", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    last = vs[tuning_order(vs)[-1]]
    toml = tmp_path / "last.toml"
    toml.write_text(target_toml(last.target))
    alone = tmp_path / "alone.jsonl"
    subprocess.run([sys.executable, "-m", "autotune.cli", "tune", str(tiny_onnx), "--trials", str(TRIALS),
                    "--seed", str(SEED), "--workers", "0", "--log", str(alone), "--target", str(toml)],
                   cwd=ROOT, check=True, timeout=600, capture_output=True)
    got = _records(alone)
    assert len(got) == TRIALS
    assert _records(log, got[0]["target"]["chip"]) == got

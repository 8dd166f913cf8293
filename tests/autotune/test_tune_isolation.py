"""A tune's log does not depend on what ran before it in the same process.

The same seed must give the same tune whether the target is tuned alone (``graphtune tune
--target``, a fresh process) or after other targets in one process (``graphtune sweep``'s
cold references, ``bench/sweep.py --runs cold``): no process-wide memo, RNG, interning
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

from autotune import RunOptions, SearchOptions, tune
from autotune.whatif._sweep import sweep
from autotune.whatif._targets import Variant, make_variants, parse_set
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


def test_a_cold_sweep_gives_each_variant_its_lone_tune(tiny_onnx: Path, tmp_path: Path) -> None:
    """The cold reference of ``bench/sweep.py`` (every variant in one process and one log, no
    warm start) against the last-tuned variant tuned alone in a fresh interpreter."""
    vs = _variants()
    log = tmp_path / "cold.jsonl"
    with_others = []
    sweep([str(tiny_onnx)], vs, trials_per_variant=TRIALS, log=log, workers=0, seed=SEED,
          warm=False, pretrained=False, allocate="equal",
          on_variant=lambda _n, v, _what: with_others.append(v))
    last = with_others[-1]
    assert len(with_others) == len(vs)
    alone = tmp_path / "alone.jsonl"
    script = (
        "import sys, warnings; warnings.simplefilter('ignore')\n"
        "from autotune.whatif._sweep import sweep\n"
        "from autotune.whatif._targets import make_variants, parse_set\n"
        "from compiler.target import Target\n"
        "vs = make_variants(Target.default(), [parse_set('l1.data_bytes=64K,1M'),\n"
        "                                      parse_set('ddr.bytes_per_cycle=13,27')])\n"
        "v = next(v for v in vs if v.name == sys.argv[1])\n"
        f"sweep([sys.argv[2]], [v], trials_per_variant={TRIALS}, log=sys.argv[3], workers=0,\n"
        f"      seed={SEED}, warm=False, pretrained=False, allocate='equal')\n")
    subprocess.run([sys.executable, "-c", script, last.name, str(tiny_onnx), str(alone)],
                   cwd=ROOT, check=True, timeout=600)
    got = _records(alone)
    assert len(got) == TRIALS
    chip = got[0]["target"]["chip"]
    assert _records(log, chip) == got

"""The fuzz suite's shared inputs: a small CNN, its schedules, a compiled DeepFM, a log.

Built once per session (compiling DeepFM is the only slow step, a few seconds).
Hypothesis runs derandomized by default so the default run is the same
1,000+ cases every time; ``GRAPHTUNE_FUZZ=N`` multiplies the case counts and
draws fresh random cases (a longer hunt, e.g. before a release).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, settings

from compiler import zoo
from compiler.model import Model
from tests.fuzz._harness import STATS, summary

SCALE = int(os.environ.get("GRAPHTUNE_FUZZ", "1") or 1)
settings.register_profile(
    "graphtune-fuzz",
    derandomize=SCALE == 1,
    database=None,
    deadline=None,  # the harness bounds each case itself
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much],
)


def examples(n: int) -> settings:
    """Settings for a fuzz test of ``n`` cases (times ``GRAPHTUNE_FUZZ``)."""
    return settings(settings.get_profile("graphtune-fuzz"), max_examples=n * SCALE)


@pytest.fixture(scope="session")
def kit(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from compiler.auto import graph_schedule_level
    from compiler.target import Target
    from logs import Provenance, Record, RecordWriter, Result, Status, TargetKey, WorkloadInfo

    d = tmp_path_factory.mktemp("fuzz-kit")
    target = Target.default()
    proto = zoo.build("tiny_cnn", batch=2, weights="inputs", image_size=16)
    tiny = d / "tiny.onnx"
    onnx.save(proto, str(tiny))
    graph = Model(proto, "tiny").graph
    schedules = {level: graph_schedule_level(graph, target, level) for level in (0, 3)}
    for level, s in schedules.items():
        (d / f"o{level}.json").write_text(s.dumps())
    log = d / "good.jsonl"
    with RecordWriter(log) as w:
        for level, s in schedules.items():
            w.write(Record(WorkloadInfo(graph.workload_key, "tiny", graph.input_shapes(), 2),
                           TargetKey(target.name, target.hash), s.to_json(),
                           Result(Status.OK, latency_us=10.0 + level), Provenance.now()))
    dfm = d / "dfm.onnx"
    onnx.save(zoo.build("deepfm", batch=4, weights="inputs"), str(dfm))
    art = d / "dfm.stcobj"
    Model(onnx.load(str(dfm)), "dfm", path=str(dfm)).compile(art, **{"tb.graph_schedule_level": 0})
    ids = d / "ids.npy"
    np.save(ids, np.random.default_rng(0).integers(0, 259, (4, 39)))
    toml = Path(__import__("compiler").__file__).parent / "targets" / "stcp920.toml"
    return {"dir": d, "tiny": tiny, "graph": graph, "schedules": schedules,
            "o0": d / "o0.json", "o3": d / "o3.json", "log": log, "dfm": dfm, "art": art,
            "ids": ids, "target": target, "toml_text": toml.read_text(),
            "art_bytes": art.read_bytes(), "tiny_bytes": tiny.read_bytes()}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if sum(STATS.cases.values()):
        terminalreporter.write_line(summary())

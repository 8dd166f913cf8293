"""Which simulator a cost model learnt from: a fingerprint of what the simulator answers.

The shipped pre-trained cost model (:func:`cost_model.pretrained_path`) is named
after its feature set, but what it learnt is the simulator's latencies: when a
cost term changes (issue 25 changed the capacity and LLB rules after the model
was trained), the features still match and the trees are stale. The simulator's
``MEASURER_VERSION`` is not always bumped for such a change, and a hash of its
source changes with every comment, so the fingerprint is behavioural: the
latencies the simulator gives O0-O3 of two small zoo models (a CNN, and DeepFM,
whose embedding gathers exercise the table-placement rules) on four targets
(the STCP920, L1 384K, DDR at half rate, both), rounded to 0.01 µs, hashed with
the measurer's name and version. ``tools/train_pretrained.py`` records it beside
the model (``xgb-<feature set>.json``); a tune that starts from the model
compares it with today's and says when they differ
(:func:`autotune.sampling._warm.pretrained_factory`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import warnings

__all__ = ["PROBE_MODELS", "PROBE_TARGETS", "simulator_fingerprint"]

PROBE_MODELS: tuple[tuple[str, int, tuple[tuple[str, int], ...]], ...] = (
    ("tiny_cnn", 8, ()),
    ("deepfm", 64, ()),
)
"""(zoo model, batch, options) simulated for the fingerprint."""

PROBE_TARGETS: tuple[dict[str, dict[str, int]], ...] = (
    {},
    {"l1": {"data_bytes": 384 * 1024}},
    {"ddr": {"bytes_per_cycle": 13}},
    {"l1": {"data_bytes": 384 * 1024}, "ddr": {"bytes_per_cycle": 13}},
)
"""Changes of the STCP920 the probes run on."""


@functools.lru_cache(maxsize=1)
def simulator_fingerprint() -> str:
    """12 hex digits: the hash of the probes' simulated latencies (see the module doc)."""
    from autotune.sampling._studies import seed_schedules
    from compiler import zoo
    from compiler.model import Model
    from compiler.target import Target
    from sim import MEASURER, MEASURER_VERSION, measure

    answers: list[object] = [MEASURER, MEASURER_VERSION]
    for name, batch, options in PROBE_MODELS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = Model(zoo.build(name, batch=batch, weights="inputs", **dict(options)),
                          name=name).graph
        for change in PROBE_TARGETS:
            target = Target.default().replace(**change) if change else Target.default()
            levels = [s for label, s in seed_schedules(graph, target) if label in
                      ("O0", "O1", "O2", "O3")]
            for m in measure(graph, levels, target):
                answers.append([m.status, None if m.latency_us is None else round(m.latency_us, 2)])
    return hashlib.sha256(json.dumps(answers).encode()).hexdigest()[:12]

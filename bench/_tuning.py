"""Shared helpers of the tuning benches: zoo graphs and best-so-far curves from a log."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler import zoo  # noqa: E402
from compiler.graph import Graph  # noqa: E402
from compiler.model import Model  # noqa: E402

# The acceptance models: (name, batch, zoo options).
MODELS: dict[str, tuple[str, int, dict[str, int]]] = {
    "resnet50": ("resnet50", 16, {}),
    "bert_base": ("bert_base", 8, {"seq": 128}),
    "mobilenet_v2": ("mobilenet_v2", 16, {}),
    "deepfm": ("deepfm", 2560, {}),
}


def zoo_graph(key: str) -> Graph:
    """The graph of an acceptance model (weights as inputs: nothing large is generated)."""
    name, batch, opts = MODELS[key]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(zoo.build(name, batch=batch, weights="inputs", **opts), name=key).graph


def best_so_far(log: Path) -> list[float]:
    """Best latency after each record of a (one-task) log; inf before the first success."""
    best = float("inf")
    out = []
    for line in log.read_text().splitlines():
        r = json.loads(line)["result"]
        if r["status"] == "ok":
            best = min(best, r["latency_us"])
        out.append(best)
    return out


def reach(curve: list[float], target_us: float) -> int | None:
    """Measurements needed until the best is at most ``target_us`` (None: never)."""
    for k, v in enumerate(curve):
        if v <= target_us:
            return k + 1
    return None

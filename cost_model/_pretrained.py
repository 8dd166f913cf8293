"""The pre-trained cost model shipped with graphtune, and how to find it.

The file is ``cost_model/pretrained/xgb-<feature set id>.ubj``: an
:class:`~cost_model.XGBModel` in XGBoost's UBJSON, trained by
``tools/train_pretrained.py`` on the zoo's models measured on several targets.
The feature set id is a hash of :func:`cost_model.feature_names`, so a
graphtune whose features changed finds no file (and says so) instead of
loading trees that read the wrong columns: retrain it with the script.

Beside it, ``xgb-<feature set id>.json`` (:func:`pretrained_info`) records what the
model was trained on, among it ``"simulator"``: the fingerprint of the simulator
whose latencies it learnt (``autotune.sampling._simprint.simulator_fingerprint``,
computed where the simulator may be imported). The features can match while
the simulator changed (a stale model); the tune that loads the model compares
the fingerprints and says so.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

from cost_model._features import feature_names

__all__ = ["feature_set_id", "pretrained_filename", "pretrained_info", "pretrained_path"]


def feature_set_id() -> str:
    """8 hex digits identifying the feature columns (names and order)."""
    return hashlib.sha256(json.dumps(feature_names()).encode()).hexdigest()[:8]


def pretrained_filename() -> str:
    """The shipped model's file name for this feature set."""
    return f"xgb-{feature_set_id()}.ubj"


def pretrained_path() -> Path | None:
    """The shipped model of this feature set, or None when none is shipped."""
    p = Path(str(resources.files("cost_model").joinpath("pretrained", pretrained_filename())))
    return p if p.is_file() else None


def pretrained_info(path: Path | None = None) -> dict[str, object] | None:
    """What the shipped model (or the model file ``path``) was trained on: the JSON beside it
    (``"simulator"``, ``"rows"``, ``"trained"``, ...), or None when there is none."""
    p = path if path is not None else pretrained_path()
    if p is None:
        return None
    side = p.with_suffix(".json")
    if not side.is_file():
        return None
    try:
        data = json.loads(side.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None

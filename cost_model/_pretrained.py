"""The pre-trained cost model shipped with graphtune, and how to find it.

The file is ``cost_model/pretrained/xgb-<feature set id>.ubj``: an
:class:`~cost_model.XGBModel` in XGBoost's UBJSON, trained by
``tools/train_pretrained.py`` on the zoo's models measured on several targets.
The feature set id is a hash of :func:`cost_model.feature_names`, so a
graphtune whose features changed finds no file (and says so) instead of
loading trees that read the wrong columns: retrain it with the script.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

from cost_model._features import feature_names

__all__ = ["feature_set_id", "pretrained_filename", "pretrained_path"]


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

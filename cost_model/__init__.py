"""Cost models that rank candidate schedules, so a tuner measures only the promising few.

* :func:`features` turns schedules of one graph into rows of named, documented
  columns (:data:`FEATURES`), normalised by the target's rates and capacities,
  without running the simulator (this package never imports ``sim``);
* :class:`CostModel` is the interface (``fit``, ``update``, ``predict``: higher
  = faster); :class:`XGBModel` learns from measurements (absolute-error regression
  of log-throughput on top of a roofline prior, whose score is also an input
  column; ``save``/``load`` in XGBoost's JSON/UBJSON),
  :class:`AnalyticalModel` is that roofline estimate alone and
  :class:`RandomModel` the baseline;
* :mod:`cost_model.metrics`: Spearman, pairwise accuracy, top-k recall;
* :mod:`cost_model.selection`: training settings scored by leaving networks out
  (how the shipped model's settings are chosen);
* :func:`pretrained_path`: the pre-trained model shipped as package data
  (``pretrained/xgb-<feature_set_id()>.ubj``, trained by
  ``tools/train_pretrained.py``), None when this feature set has none.

Example:
    >>> X = features(graph, measured, target)
    >>> model = XGBModel(); model.fit(X, throughputs)
    >>> scores = model.predict(features(graph, proposals, target))
"""

from cost_model import metrics, selection
from cost_model._base import CostModel, CostModelError
from cost_model._features import FEATURES, Feature, feature_names, features, reference_cycles
from cost_model._pretrained import feature_set_id, pretrained_info, pretrained_path
from cost_model._simple import AnalyticalModel, RandomModel, analytical_cycles
from cost_model._xgb import XGBModel

__all__ = [
    "FEATURES",
    "AnalyticalModel",
    "CostModel",
    "CostModelError",
    "Feature",
    "RandomModel",
    "XGBModel",
    "analytical_cycles",
    "feature_names",
    "feature_set_id",
    "features",
    "metrics",
    "pretrained_info",
    "pretrained_path",
    "reference_cycles",
    "selection",
]

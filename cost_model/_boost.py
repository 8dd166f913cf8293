"""``train``: ``xgboost.train`` without its per-round Python, for the models a tune retrains.

``xgboost.train`` wraps each boosting round in Python: ``Booster.update`` and
``Booster.eval_set`` read the data's column names and types back from C and set them on
the booster (``_assign_dmatrix_features``, four C calls and a comparison per matrix), a
callback container parses the evaluation text into a history, and ``EarlyStopping``
keeps its own. On the six retrainings of a 400-trial BERT-base tune (a few hundred
rows, ~250 rounds with early stopping) that was 18 % of their CPU and 8.8 % of their
instructions (issue 20: the driver's CPU per measurement, ``bench/results/tuning.md``).
:func:`train` makes the same C calls in the same order (``XGBoosterUpdateOneIter``,
``XGBoosterEvalOneIter``), parses the evaluation text as ``xgboost.callback`` does, stops
on the same rule (``EarlyStopping``: the last metric of the held-out set, strictly better
by ``min_delta`` 0, ``rounds`` rounds without improving) and sets the same ``best_score``
/ ``best_iteration`` attributes: the booster is byte for byte the one ``xgboost.train``
returns (``tests/cost_model/test_boost.py`` compares their raw bytes). The names and
types are assigned once, before the first round, as the first round's call would.

``reset=False`` skips the last step, ``Booster.reset()`` (a round trip of the model
through a buffer, ~8 % of a tune's retraining), for a booster trained from scratch that
is only sliced: ``XGBModel``'s early stopping keeps ``booster[:best]``, byte for byte the
reset booster's slice.

If this XGBoost lacks the private C handles used here, :func:`train` is ``xgboost.train``.
"""

from __future__ import annotations

import ctypes
from typing import Any

__all__ = ["train"]

# Metrics XGBoost's EarlyStopping maximises when ``maximize`` is not given.
_MAXIMISED = ("auc", "aucpr", "pre", "pre@", "map", "ndcg", "auc@", "aucpr@", "map@", "ndcg@")


def train(params: dict[str, Any], dtrain: Any, rounds: int, *, held: Any = None,
          early_stopping_rounds: int | None = None, base: Any = None,
          reset: bool = True) -> Any:
    """``xgboost.train(params, dtrain, rounds, evals=[(held, "held")],
    early_stopping_rounds=..., verbose_eval=False, xgb_model=base)``, the same booster.

    Args:
        params: XGBoost parameters.
        dtrain: The training ``DMatrix``.
        rounds: Boosting rounds at most.
        held: A held-out ``DMatrix`` evaluated after each round (named ``"held"``), or None.
        early_stopping_rounds: With ``held``: stop after this many rounds without improving.
        base: A booster to continue from (``xgb_model``), or None.
        reset: End with ``Booster.reset()`` as ``xgboost.train`` does (it writes the model
            to a buffer and reads it back, releasing the training's caches: 1.6-1.9 ms of a
            22 ms retraining in a BERT-base tune). False for a booster only sliced
            (``booster[:n]``) and dropped, trained without ``base``: the slice is byte for
            byte the reset booster's slice (its JSON, UBJSON, pickle, configuration and
            margins: ``tests/cost_model/test_boost.py``), and the caches go with the
            booster. On a ``base`` the two slices differ: reset there.
    """
    import xgboost as xgb

    found = _internals()
    if found is None:  # not this XGBoost's internals: the API
        return xgb.train(params, dtrain, rounds, evals=[(held, "held")] if held is not None
                         else None, early_stopping_rounds=early_stopping_rounds,
                         verbose_eval=False, xgb_model=base)
    lib, check, ulong = found
    evals = [held] if held is not None else []
    bst = xgb.Booster(params, [dtrain, *evals], model_file=base)
    start = bst.num_boosted_rounds()
    # what the first round's update/eval_set do (and every later one again, to no effect)
    if dtrain.num_row():
        bst._assign_dmatrix_features(dtrain)
    for d in evals:
        if d.num_row():
            bst._assign_dmatrix_features(d)
    handle = bst.handle
    dhandle = dtrain.handle
    if evals:
        dmats = (ctypes.c_void_p * 1)(evals[0].handle)
        names = (ctypes.c_char_p * 1)(b"held")
        msg = ctypes.c_char_p()
    stop = early_stopping_rounds if evals else None
    best: float | None = None
    best_at = 0
    since = 0
    maximise: bool | None = None
    for i in range(rounds):
        check(lib.XGBoosterUpdateOneIter(handle, ctypes.c_int(i), dhandle))
        if not evals:
            continue
        check(lib.XGBoosterEvalOneIter(handle, ctypes.c_int(i), dmats, names, ulong(1),
                                       ctypes.byref(msg)))
        assert msg.value is not None
        # as xgboost.core._parse_eval_str: "[i]\theld-metric:value ...", the last one counts
        metric, value = msg.value.decode().split()[-1].split(":")
        score = float(value)
        if not stop:
            continue
        if maximise is None:
            name = metric.split("-", 1)[1]
            maximise = name != "mape" and any(name.startswith(x) for x in _MAXIMISED)
        if best is None or (score - 0 > best if maximise else best - 0 > score):
            best, best_at, since = score, i + start, 0
        else:
            since += 1
            if since >= stop:
                break
    if stop and best is not None:
        bst.set_attr(best_score=str(best), best_iteration=str(best_at))
    return bst.reset() if reset else bst


def _internals() -> tuple[Any, Any, Any] | None:
    """XGBoost's C library, its error check and its length type (None: not found)."""
    import xgboost as xgb

    core = xgb.core
    found = (getattr(core, "_LIB", None), getattr(core, "_check_call", None),
             getattr(core, "c_bst_ulong", None))
    return None if any(x is None for x in found) else found

"""The calibration set: read, checked against the model, split into batches.

A calibration set maps each data input of the model to its samples stacked
along dim 0. It comes as the guide's list of feeds (``[{"input": x}, ...]``,
concatenated), one dict of arrays, or an ``.npz`` file (``graphtune ... --calib``).
Every problem (a name the model lacks, a missing input, a wrong shape or dtype,
no samples) is one :class:`QuantError` line; nothing is written before the check.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from compiler.quant._errors import QuantError

CalibrationSet = dict[str, np.ndarray]


def calibration_set(value: Any) -> CalibrationSet:
    """A calibration set from an ``.npz`` path, a dict of arrays or a list of feeds.

    Raises:
        QuantError: unreadable file, values that are not arrays, an empty set.
    """
    if isinstance(value, str | os.PathLike):
        return load_npz(value)
    if isinstance(value, Mapping):
        feeds: Sequence[Mapping[str, Any]] = [value]
    elif isinstance(value, list | tuple):
        feeds = value
    else:
        raise QuantError("calibration_set must be a dict {input name: array}, a list of such "
                         f"feeds or an .npz path, got {type(value).__name__}")
    if not feeds:
        raise QuantError("calibration set is empty: give at least one sample per input")
    names = None
    parts: dict[str, list[np.ndarray]] = {}
    for i, feed in enumerate(feeds):
        if not isinstance(feed, Mapping):
            raise QuantError(f"calibration_set[{i}] must be a dict {{input name: array}}")
        if names is None:
            names = list(feed)
        elif sorted(feed) != sorted(names):
            raise QuantError(f"calibration_set[{i}] has inputs {sorted(feed)}, the first feed "
                             f"{sorted(names)}")
        for k, v in feed.items():
            parts.setdefault(str(k), []).append(np.asarray(v))
    try:
        out = {k: (v[0] if len(v) == 1 else np.concatenate(v)) for k, v in parts.items()}
    except ValueError as exc:
        raise QuantError(f"calibration_set feeds do not stack: {exc}") from None
    _check_nonempty(out, "calibration set")
    return out


def load_npz(path: str | os.PathLike[str]) -> CalibrationSet:
    """The arrays of an ``.npz`` file (one per model input, samples along dim 0)."""
    p = Path(path)
    if not p.is_file():
        raise QuantError(f"no such calibration file: {p}")
    try:
        with np.load(p, allow_pickle=False) as z:
            out = {k: z[k] for k in z.files}
    except Exception as exc:
        raise QuantError(f"{p} is not a readable .npz file ({type(exc).__name__})") from None
    _check_nonempty(out, str(p))
    return out


def _check_nonempty(data: Mapping[str, np.ndarray], what: str) -> None:
    if not data:
        raise QuantError(f"{what} is empty: give at least one sample per input")
    for k, v in data.items():
        if v.ndim == 0 or v.shape[0] == 0:
            raise QuantError(f"{what}: input {k!r} has no samples (shape {list(v.shape)})")


def check_against(data: Mapping[str, np.ndarray], inputs: Mapping[str, Mapping[str, Any]],
                  what: str = "calibration set") -> int:
    """Check names, shapes and dtypes against the model's data inputs; the sample count.

    Args:
        data: The calibration set.
        inputs: ``{name: {"shape": [...], "dtype": str}}`` of the model's data inputs
            (a dim 0 below 1 is symbolic).
        what: How messages name the set.

    Returns:
        The number of samples (the same for every input).

    Raises:
        QuantError: one line naming the first problem.
    """
    _check_nonempty(data, what)
    extra = sorted(set(data) - set(inputs))
    if extra:
        raise QuantError(f"{what}: the model has no input {extra[0]!r} (inputs: {', '.join(inputs)})")
    missing = [n for n in inputs if n not in data]
    if missing:
        raise QuantError(f"{what}: no data for input {missing[0]!r}")
    counts = set()
    for name, info in inputs.items():
        arr = data[name]
        want = [int(d) for d in info["shape"]]
        if arr.ndim != len(want) or any(w > 0 and int(a) != w for a, w in zip(arr.shape[1:], want[1:])):
            raise QuantError(f"{what}: input {name!r} has shape {list(arr.shape)}, the model expects "
                             f"[N, {', '.join(str(d) for d in want[1:])}] (samples along dim 0)")
        if str(arr.dtype) != str(info["dtype"]):
            raise QuantError(f"{what}: input {name!r} has dtype {arr.dtype}, the model expects "
                             f"{info['dtype']}")
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            raise QuantError(f"{what}: input {name!r} has NaN or infinite values")
        counts.add(int(arr.shape[0]))
    if len(counts) != 1:
        raise QuantError(f"{what}: inputs have different sample counts {sorted(counts)}")
    n = counts.pop()
    batch = model_batch(inputs)
    if batch and n % batch:
        raise QuantError(f"{what}: {n} samples is not a multiple of the model's batch {batch}")
    return n


def model_batch(inputs: Mapping[str, Mapping[str, Any]]) -> int:
    """The model's fixed dim 0 (0 when symbolic)."""
    first = next(iter(inputs.values()))["shape"]
    return int(first[0]) if first and int(first[0]) > 0 else 0


def batches(data: Mapping[str, np.ndarray], batch: int) -> Iterator[dict[str, np.ndarray]]:
    """Feeds of ``batch`` samples (one sample at a time when ``batch`` is 0)."""
    n = next(iter(data.values())).shape[0]
    step = batch or 1
    for i in range(0, n - step + 1, step):
        yield {k: v[i:i + step] for k, v in data.items()}


def split_held_out(data: Mapping[str, np.ndarray], batch: int,
                   fraction: float = 0.25) -> tuple[CalibrationSet, CalibrationSet]:
    """``(calibrate, held_out)``: the last ``fraction`` of whole batches is held out.

    With a single batch nothing can be held out: both parts are the whole set (the
    accuracy report says so).
    """
    n = next(iter(data.values())).shape[0]
    step = batch or 1
    nb = n // step
    held = int(nb * fraction) if nb >= 2 else 0
    held = max(held, 1) if nb >= 2 else 0
    if held == 0:
        return dict(data), dict(data)
    cut = (nb - held) * step
    return {k: v[:cut] for k, v in data.items()}, {k: v[cut:] for k, v in data.items()}

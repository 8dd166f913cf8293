"""``graphtune run``'s ``.npz`` files: inputs by name in, outputs checked against a reference.

:func:`read_npz` opens an archive without unpickling; :func:`compare` finds the
element that exceeds ``atol + rtol * |ref|`` by the most (the numpy ``allclose``
rule) and says where it is.
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from compiler.errors import GraphtuneError

if TYPE_CHECKING:
    import numpy as np


class NpzError(GraphtuneError):
    """An ``.npz`` file that cannot be read or does not fit the model."""


def read_npz(path: str | Path, what: str) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` archive by key; never unpickles (object arrays refused)."""
    import numpy as np

    p = Path(path)
    if not p.exists():
        raise NpzError(f"{what}: no such file: {p}")
    if p.is_dir():
        raise NpzError(f"{what}: {p} is a directory, not an .npz file")
    if not zipfile.is_zipfile(p):
        raise NpzError(f"{what}: {p} is not an .npz archive (save one with numpy.savez(path, "
                       "name=array, ...))")
    try:
        with np.load(p, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        text = str(exc).strip().splitlines()
        raise NpzError(f"{what}: {p} cannot be read ({text[-1] if text else type(exc).__name__}; "
                       "object arrays are never loaded)") from None


def inputs_from_npz(path: str | Path, names: list[str]) -> dict[str, np.ndarray]:
    """The arrays of an inputs ``.npz``; every key must be one of ``names``."""
    arrays = read_npz(path, "--inputs")
    extra = [k for k in arrays if k not in names]
    if extra:
        raise NpzError(f"--inputs {path}: the model has no input {extra[0]!r} "
                       f"(inputs: {', '.join(names)})")
    return arrays


@dataclass(frozen=True)
class Comparison:
    """How a run's outputs compare with a reference."""

    ok: bool
    output: str
    """The output holding the worst element."""
    index: tuple[int, ...]
    actual: float
    expected: float
    max_abs_diff: float
    """Largest ``|actual - expected|`` over every output."""
    mismatched: int
    total: int

    def where(self) -> str:
        return f"{self.output}[{', '.join(str(i) for i in self.index)}]"


def compare(outputs: Mapping[str, np.ndarray], ref_path: str | Path,
            rtol: float, atol: float) -> Comparison:
    """Compare ``outputs`` with the reference file's arrays of the same names.

    An element passes when ``|actual - expected| <= atol + rtol * |expected|``
    (NaN passes only against NaN). A reference holding one array for a model with
    one output matches whatever its key.

    Raises:
        NpzError: The reference lacks an output, or an array's shape differs.
    """
    import numpy as np

    ref = read_npz(ref_path, "--expect")
    names = list(outputs)
    if len(ref) == 1 and len(names) == 1:
        ref = {names[0]: next(iter(ref.values()))}
    missing = [n for n in names if n not in ref]
    if missing:
        raise NpzError(f"--expect {ref_path}: no array {missing[0]!r} (it holds "
                       f"{', '.join(ref) or 'nothing'}; outputs: {', '.join(names)})")
    worst: tuple[float, str, tuple[int, ...], float, float] | None = None
    max_abs = 0.0
    bad = total = 0
    for name in names:
        a = np.asarray(outputs[name])
        e = ref[name]
        if a.shape != e.shape:
            raise NpzError(f"--expect {ref_path}: {name} has shape {list(e.shape)}, the run "
                           f"made {list(a.shape)}")
        a64 = a.astype(np.float64)
        e64 = e.astype(np.float64)
        diff = np.abs(a64 - e64)
        both_nan = np.isnan(a64) & np.isnan(e64)
        diff = np.where(both_nan, 0.0, np.where(np.isnan(diff), np.inf, diff))
        allowed = atol + rtol * np.abs(np.nan_to_num(e64, nan=0.0, posinf=0.0, neginf=0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(allowed > 0, diff / np.where(allowed > 0, allowed, 1.0),
                             np.where(diff > 0, np.inf, 0.0))
        bad += int(np.count_nonzero(diff > allowed))
        total += a.size
        if a.size:
            max_abs = max(max_abs, float(diff.max()))
            flat = int(np.argmax(ratio))
            idx = tuple(int(i) for i in np.unravel_index(flat, a.shape))
            r = float(ratio.reshape(-1)[flat])
            if worst is None or r > worst[0]:
                worst = (r, name, idx, float(a64[idx]), float(e64[idx]))
    if worst is None:
        return Comparison(True, names[0] if names else "", (), 0.0, 0.0, 0.0, 0, 0)
    _, name, idx, actual, expected = worst
    return Comparison(bad == 0, name, idx, actual, expected, max_abs, bad, total)

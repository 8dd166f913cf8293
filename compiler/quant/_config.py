"""``QuantConfig``: the TensorTurbo guide's ``quant_config`` dictionary, checked.

The guide's keys: ``calibration_set`` (input name -> calibration data),
``calibrate_mode`` (``"percentile"``, the default, or ``"kl_divergence"``),
``weight_scale`` (``"power2"``, the only mode), ``preset_scale``
(``{"layer_name": [input_scale, weight_scale]}``) and ``cpu_target`` (the host
part's LLVM target; the CPU stand-in builds for the host with ``llvm`` in any case).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from compiler.quant._errors import QuantError

CALIBRATE_MODES = ("percentile", "kl_divergence")
WEIGHT_SCALES = ("power2",)
KEYS = ("calibration_set", "calibrate_mode", "weight_scale", "preset_scale", "cpu_target")


@dataclass(frozen=True)
class QuantConfig:
    """Checked quantization options (see the module doc).

    ``calibration_set`` maps each data input to its samples stacked along dim 0
    (numpy arrays); :func:`compiler.quant.calibration_set` builds it from the
    guide's list of feeds or an ``.npz`` file.
    """

    calibration_set: Mapping[str, Any]
    calibrate_mode: str = "percentile"
    weight_scale: str = "power2"
    preset_scale: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    cpu_target: str = "llvm"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> QuantConfig:
        """Check the guide's dictionary.

        Raises:
            QuantError: an unknown key, mode or preset, one line naming it.
        """
        from compiler.quant._calib import calibration_set

        if not isinstance(d, Mapping):
            raise QuantError(f"quant_config must be a dict, got {type(d).__name__}")
        unknown = sorted(set(d) - set(KEYS))
        if unknown:
            raise QuantError(f"quant_config: unknown key(s) {', '.join(map(repr, unknown))} "
                             f"(known: {', '.join(KEYS)})")
        if "calibration_set" not in d:
            raise QuantError("quant_config needs a calibration_set (input name -> calibration data)")
        mode = d.get("calibrate_mode", "percentile")
        if mode not in CALIBRATE_MODES:
            raise QuantError(f"quant_config: calibrate_mode must be one of {', '.join(CALIBRATE_MODES)}, "
                             f"got {mode!r}")
        ws = d.get("weight_scale", "power2")
        if ws not in WEIGHT_SCALES:
            raise QuantError(f"quant_config: weight_scale must be 'power2' (the only mode), got {ws!r}")
        cpu = d.get("cpu_target", "llvm")
        if not isinstance(cpu, str) or not cpu.startswith("llvm"):
            raise QuantError(f"quant_config: cpu_target must be an llvm target string, got {cpu!r}")
        return cls(calibration_set(d["calibration_set"]), mode, ws,
                   check_presets(d.get("preset_scale") or {}), cpu)


def check_presets(presets: Any, source: str = "preset_scale") -> dict[str, tuple[float, float]]:
    """``{"layer": [input_scale, weight_scale]}`` as floats, each finite and > 0.

    Raises:
        QuantError: not a mapping of two positive numbers per layer.
    """
    if not isinstance(presets, Mapping):
        raise QuantError(f"{source} must map layer names to [input_scale, weight_scale]")
    out: dict[str, tuple[float, float]] = {}
    for name, pair in presets.items():
        ok = isinstance(pair, list | tuple) and len(pair) == 2 and all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0
            for v in pair)
        if not ok:
            raise QuantError(f"{source}: layer {name!r} needs [input_scale, weight_scale], two positive "
                             f"numbers, got {pair!r}")
        out[str(name)] = (float(pair[0]), float(pair[1]))
    return out

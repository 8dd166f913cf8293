"""``graphtune quantize``: calibrate and write an INT8 QDQ ONNX model.

Also the options ``compile --quant`` shares (:func:`quant_config`). onnxruntime
is the optional extra ``graphtune[quant]``; TVM is not needed to quantize.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from autotune.commands._common import check_outputs, progress, write_atomic
from compiler.quant._config import CALIBRATE_MODES, QuantError


def register(group: click.Group) -> None:
    """Attach this module's commands."""
    group.add_command(quantize_cmd)


def quant_config(calib: str, calibrate: str, preset_path: str | None) -> dict[str, Any]:
    """The guide's ``quant_config`` from the command-line options (checked)."""
    from compiler.quant import QuantConfig, check_presets, load_npz

    presets: dict[str, Any] = {}
    if preset_path is not None:
        p = Path(preset_path)
        try:
            raw = json.loads(p.read_text())
        except FileNotFoundError:
            raise QuantError(f"no such preset-scale file: {p}") from None
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise QuantError(f"{p} is not a JSON file of preset scales ({type(exc).__name__})") from None
        presets = check_presets(raw, source=str(p))
    cfg = {"calibration_set": load_npz(calib), "calibrate_mode": calibrate, "preset_scale": presets}
    QuantConfig.from_dict(cfg)
    return cfg


@click.command("quantize")
@click.argument("model_path", metavar="MODEL.onnx", type=click.Path(dir_okay=False))
@click.option("--calib", "calib", required=True, type=click.Path(dir_okay=False),
              help="Calibration set: an .npz with one array per model input, samples along dim 0.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The INT8 QDQ ONNX model to write.")
@click.option("--calibrate", type=click.Choice(CALIBRATE_MODES), default="percentile", show_default=True,
              help="How activation ranges are calibrated.")
@click.option("--preset-scales", "preset_path", type=click.Path(dir_okay=False),
              help='JSON {"onnx node name": [input_scale, weight_scale]}, used exactly.')
@click.option("--batch", type=int, default=None, help="Set the batch (dim 0 of every input).")
@click.option("--json", "as_json", is_flag=True, help="Print the accuracy report as JSON.")
def quantize_cmd(model_path: str, calib: str, output: str, calibrate: str, preset_path: str | None,
                 batch: int | None, as_json: bool) -> None:
    """Calibrate MODEL.onnx on a calibration set and write its INT8 QDQ model.

    Scales are powers of two; weights are quantized per output channel. The last
    quarter of the calibration batches is held out to report the INT8 model's
    error against the FP32 model.
    """
    if batch is not None and batch < 1:
        raise QuantError(f"--batch must be >= 1, got {batch}")
    out = check_outputs({"-o": Path(output)}, inputs=[model_path, calib, preset_path])["-o"]
    from compiler.model import load_onnx
    from compiler.quant import float_proto, quantize, require_onnxruntime
    from compiler.quant._config import QuantConfig

    require_onnxruntime()
    cfg = QuantConfig.from_dict(quant_config(calib, calibrate, preset_path))
    with progress(f"quantizing {model_path}"):
        model = load_onnx(model_path)
        if batch is not None:
            model.set_batch(batch)
        result = quantize(float_proto(model), cfg)
    size = write_atomic(out, result.model.SerializeToString(), inputs=[model_path, calib])
    if as_json:
        click.echo(json.dumps({"output": str(out), "bytes": size, **result.accuracy.to_json()}))
    else:
        click.echo(f"wrote {out} ({size / 1e6:.1f} MB), {calibrate} calibration")
        click.echo(result.accuracy.line())

"""Model file formats: what graphtune reads, and one line for what it does not.

Imports nothing of graphtune but its errors, so :mod:`compiler.model` and
:mod:`compiler.torch_import` both use it without importing each other.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ACCEPTED", "TORCH_EXTRA", "unsupported_format"]

TORCH_EXTRA = "pip install -e '.[torch]' (torch==2.13.0, the CPU build)"

ACCEPTED = (
    "graphtune reads ONNX (.onnx) and torch.export programs (.pt2): save one with "
    "torch.export.save(torch.export.export(model.eval(), example_inputs), 'model.pt2') "
    "or torch.onnx.export(model, example_inputs, 'model.onnx'); for TensorFlow/Keras "
    "use tf2onnx"
)
"""The second half of the one line for a model file graphtune does not read."""


def unsupported_format(p: Path) -> str | None:
    """One line for a model file of a framework graphtune does not read, else None.

    Recognised by extension and by content (a TorchScript or ``torch.save`` zip, an
    HDF5 Keras file, a TF SavedModel directory), so a renamed file is told the same;
    graphtune's own tuning logs and schedules, given in a model's place, are named too.
    """
    suffix = p.suffix.lower()
    if p.is_dir():
        if (p / "saved_model.pb").exists() or (p / "saved_model.pbtxt").exists():
            return f"{p} is a TensorFlow SavedModel; {ACCEPTED}"
        return None
    try:
        with open(p, "rb") as f:
            head = f.read(64)
    except OSError:
        return None
    if suffix == ".jsonl" or head.startswith(b'{"v":'):
        return (f"{p} is a tuning log (JSON lines), not a model: give the .onnx or .pt2 it "
                "was tuned from (graphtune log show reads the log)")
    if head.lstrip().startswith(b"{") and b'"graphtune.GraphSchedule"' in head:
        return (f"{p} is a schedule (JSON), not a model: give the model, and the schedule "
                "with --schedule")
    if suffix in (".keras", ".h5", ".hdf5") or head.startswith(b"\x89HDF"):
        return f"{p} is a Keras/HDF5 file; {ACCEPTED}"
    if suffix == ".pb":
        return f"{p} is a TensorFlow graph; {ACCEPTED}"
    if suffix in (".pt", ".pth", ".ptl", ".bin"):
        return f"{p} is a TorchScript or torch.save file, not a model graphtune reads; {ACCEPTED}"
    if head.startswith(b"PK"):
        return f"{p} is a zip archive (TorchScript or torch.save?), not ONNX; {ACCEPTED}"
    return None

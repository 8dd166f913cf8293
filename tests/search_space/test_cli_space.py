"""``graphtune space``: JSON and tables, one space per NPU function, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
from click.testing import CliRunner

from autotune.cli import main
from compiler import zoo


def test_space_json_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "tiny.onnx"
    onnx.save(zoo.build("tiny_cnn", batch=2, weights="inputs", image_size=16), str(path))
    r = CliRunner().invoke(main, ["space", str(path), "--batch", "4", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    f = d["functions"][0]
    assert d["batch"] == 4 and f["ops"] > 0 and f["dimensions"]["cut"]["count"] == f["cut_points"]
    assert f["log10_size_tied"] <= f["log10_size_untied"]
    r = CliRunner().invoke(main, ["space", str(path)])
    assert r.exit_code == 0 and "dimensions" in r.stdout
    for args in (["space", str(tmp_path / "missing.onnx")], ["space", str(path), "--batch", "0"]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1

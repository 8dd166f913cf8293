"""PyTorch models imported directly: ``load_torch`` / ``.pt2`` both ways, compiled and run.

Each model is imported through ``from_exported_program`` (``via="export"``) and
through ``torch.onnx.export`` into the ONNX path (``via="onnx"``), compiled at O3 and
run; the artifact's output must equal torch's own (rtol=atol=2e-3). The default
suite uses shrunk models (a ResNet-18 layout at width 8 on 32x32 images, a 64-wide
transformer block); the ``slow`` test runs the full-size ResNet-18 at 224x224 through
the CLI (``info``, ``tune --trials 50``, ``compile --log``, ``run --expect``).

The messages for files graphtune does not read (TorchScript, Keras, SavedModel) and
for a ``.pt2`` without torch need no torch and always run.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from autotune.cli import main

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "graphtune"
TOL = 2e-3


def run(*args: object) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def one_line_error(r: Result) -> str:
    assert r.exit_code == 2, (r.exit_code, r.output, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


# ---- no torch needed -------------------------------------------------------------------------
@pytest.mark.parametrize("name,content", [
    ("model.pt", b"PK\x03\x04torchscript-ish"),
    ("weights.pth", b"\x80\x02}q\x00."),
    ("model.h5", b"\x89HDF\r\n\x1a\n"),
    ("model.keras", b"PK\x03\x04keras"),
    ("renamed.onnx", b"PK\x03\x04a zip, not a protobuf"),
])
def test_other_frameworks_get_one_line(tmp_path: Path, name: str, content: bytes) -> None:
    p = tmp_path / name
    p.write_bytes(content)
    line = one_line_error(run("info", p))
    assert ".pt2" in line and "torch.export" in line and "ONNX" in line, line
    assert "DecodeError" not in line


def test_a_log_or_schedule_in_a_models_place_is_named(tmp_path: Path) -> None:
    """`graphtune info tune.jsonl` said "not an ONNX model or is truncated (DecodeError)"."""
    log = tmp_path / "tune.jsonl"
    log.write_text('{"v":"1.2","workload":{"key":"ab"}}\n')
    line = one_line_error(run("info", log))
    assert "is a tuning log (JSON lines), not a model" in line and "DecodeError" not in line
    sched = tmp_path / "s.json"
    sched.write_text('{\n  "kind": "graphtune.GraphSchedule",\n  "v": 1\n}')
    line = one_line_error(run("simulate", sched, "--level", "3"))
    assert "is a schedule (JSON), not a model" in line and "--schedule" in line, line


def test_saved_model_dir_gets_one_line(tmp_path: Path) -> None:
    d = tmp_path / "saved"
    d.mkdir()
    (d / "saved_model.pb").write_bytes(b"\x08\x01")
    line = one_line_error(run("info", d))
    assert "SavedModel" in line and ".pt2" in line, line


def test_pt2_without_torch_names_the_extra(tmp_path: Path) -> None:
    p = tmp_path / "m.pt2"
    p.write_bytes(b"PK\x03\x04")
    # A fresh interpreter where `import torch` fails, as on an install without the extra.
    code = ("import sys; sys.modules['torch'] = None; "
            "from autotune.cli import main; sys.argv = ['graphtune', 'info', sys.argv[1]]; main()")
    r = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True,
                       cwd=REPO, timeout=300)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "[torch]" in lines[0] and "torch==2.13.0" in lines[0], r.stderr


# ---- with torch ------------------------------------------------------------------------------
torch = pytest.importorskip("torch")

from compiler.executor import Executor  # noqa: E402
from compiler.torch_import import PATH_EXPORT, PATH_ONNX, load_torch  # noqa: E402
from tests.compiler.torch_models import ResNet18, TransformerBlock, randomize_batchnorm  # noqa: E402


def _resnet() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return randomize_batchnorm(ResNet18(width=8, classes=10)), torch.randn(2, 3, 32, 32)


def _block() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(1)
    return TransformerBlock(dim=64, heads=4, mlp=128).eval(), torch.randn(2, 8, 64)


@pytest.mark.parametrize("make", [_resnet, _block], ids=["resnet18", "transformer_block"])
@pytest.mark.parametrize("via", ["export", "onnx"])
def test_both_ways_compile_and_run_equal_to_torch(tmp_path: Path, make, via: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    module, x = make()
    with torch.no_grad():
        want = module(x).numpy()
    model = load_torch(module, (x,), via=via)
    assert model.get_input_info() == {"x": {"shape": list(x.shape), "dtype": "float32"}}
    out = tmp_path / "m.stcobj"
    with caplog.at_level(logging.INFO, logger="compiler._build"):
        model.compile(out)
    # INFO records are `graphtune compile`'s progress stages: the write is reported once,
    # by the command (it showed twice, with two different times).
    assert not [r for r in caplog.records
                if r.levelno >= logging.INFO and r.getMessage().startswith("wrote")]
    assert model.import_path.startswith(PATH_EXPORT if via == "export" else PATH_ONNX)
    got = Executor.load(out).run({"x": x.numpy()})[0]
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL)


def test_resnet_batchnorm_folds_into_convs() -> None:
    """The export path gives the ONNX path's op set: no batch_norm, no tuple bindings."""
    module, x = _resnet()
    ops = {"export": load_torch(module, (x,), via="export").graph,
           "onnx": load_torch(module, (x,), via="onnx").graph}
    types = {k: sorted({op.op_type for op in g.ops}) for k, g in ops.items()}
    assert "nn.batch_norm" not in types["export"]
    convs = {k: sum(op.op_type == "nn.conv2d" for op in g.ops) for k, g in ops.items()}
    assert convs["export"] == convs["onnx"] == 20
    # Same network, different Relax programs from the two frontends: different keys.
    assert ops["export"].workload_key != ops["onnx"].workload_key


def test_pt2_cli_info_names_the_path_and_batch_reexports(tmp_path: Path) -> None:
    module, x = _block()
    p = tmp_path / "block.pt2"
    torch.export.save(torch.export.export(module, (x,)), str(p))
    r = run("info", p, "--json")
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert info["import_path"] == PATH_EXPORT
    assert info["inputs"] == {"x": {"shape": [2, 8, 64], "dtype": "float32"}}
    human = run("info", p)
    assert "imported through torch.export" in human.output
    # torch.export specialises shapes: a static program cannot change its batch ...
    line = one_line_error(run("info", p, "--batch", "3"))
    assert "exported at x [2, 8, 64]" in line and "dynamic_shapes" in line, line
    # ... one exported with a dynamic batch can.
    dyn = tmp_path / "dyn.pt2"
    torch.export.save(torch.export.export(
        module, (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch", min=1, max=64)}}), str(dyn))
    r = run("info", dyn, "--batch", "3", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["inputs"]["x"]["shape"] == [3, 8, 64]


def test_load_torch_refuses_other_objects() -> None:
    from compiler.errors import ModelError

    with pytest.raises(ModelError, match=r"nn\.Module or an ExportedProgram"):
        load_torch("model.pt")
    with pytest.raises(ModelError, match="needs example inputs"):
        load_torch(_block()[0])


@pytest.mark.slow
@pytest.mark.parametrize("which", ["resnet18", "transformer_block"])
def test_pt2_start_to_finish_cli(tmp_path: Path, which: str) -> None:
    """Full-size ResNet-18 (224x224) and a transformer block: info, tune, compile --log, run --expect."""
    torch.manual_seed(0)
    if which == "resnet18":
        module = randomize_batchnorm(ResNet18())
        x = torch.randn(2, 3, 224, 224)
    else:
        module, x = TransformerBlock(dim=256, heads=8, mlp=1024).eval(), torch.randn(4, 64, 256)
    with torch.no_grad():
        want = module(x).numpy()
    p = tmp_path / f"{which}.pt2"
    torch.export.save(torch.export.export(module, (x,)), str(p))
    np.savez(tmp_path / "in.npz", x=x.numpy())
    np.savez(tmp_path / "ref.npz", output_0=want)
    env = {**os.environ, "RAY_ADDRESS": ""}

    def cli(*args: object) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                           cwd=tmp_path, env=env, timeout=1800)
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r

    assert "imported through torch.export" in cli("info", p).stdout
    cli("tune", p, "--trials", "50", "--workers", "0", "--log", "t.jsonl")  # no Ray: a loaded
    # machine once kept a Ray worker from starting within 180 s here
    cli("compile", p, "--log", "t.jsonl", "--strict", "-o", "m.stcobj")
    r = cli("run", "m.stcobj", "--inputs", "in.npz", "--expect", "ref.npz",
            "--rtol", TOL, "--atol", TOL)
    assert "matches ref.npz" in r.stdout

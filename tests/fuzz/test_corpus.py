"""Every hand-made bad file in ``tests/data/bad`` through the command that reads its kind.

Each must end with exit status 2 and one line (a few odd-but-harmless files may
also succeed), in bounded time and memory, and leave nothing behind. A library
whose checksum does not match its artifact's metadata must never reach the
loader. A few representative files also go through the installed console
script, where anything TVM prints to file descriptor 2 would show.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.fuzz._harness import PROGRESS, STATS, leftovers, run_cli

BAD = Path(__file__).resolve().parents[1] / "data" / "bad"
SCRIPT = Path(sys.executable).parent / "graphtune"
# Odd but harmless: these may also be accepted.
MAY_PASS = {"onnx/opset_999.onnx", "schedule/utf16.json"}
# Artifacts whose lib.so matches meta.json (it is handed to the loader, which refuses it).
CHECKSUM_MATCHES = {"lib_not_a_library.stcobj", "member_path_escape.stcobj"}


def corpus(kind: str) -> list[str]:
    return sorted(p.name for p in (BAD / kind).iterdir())


def _expect(kind: str, name: str) -> tuple[int, ...]:
    return (0, 2) if f"{kind}/{name}" in MAY_PASS else (2,)


@pytest.mark.parametrize("name", corpus("onnx"))
def test_onnx(kit: dict[str, Any], name: str) -> None:
    STATS.files["corpus onnx"] += 1
    extra = ["--batch", "3"] if name == "fixed_batch.onnx" else []
    run_cli("corpus-onnx", "info", BAD / "onnx" / name, *extra, allowed=_expect("onnx", name))


@pytest.mark.parametrize("name", corpus("schedule"))
def test_schedule(kit: dict[str, Any], name: str, tmp_path: Path) -> None:
    STATS.files["corpus schedule"] += 1
    path = BAD / "schedule" / name
    run_cli("corpus-schedule", "simulate", kit["tiny"], "--schedule", path,
            allowed=_expect("schedule", name))
    out = tmp_path / "x.stcobj"
    if _expect("schedule", name) == (2,):
        run_cli("corpus-schedule", "compile", kit["tiny"], "--schedule", path, "-o", out,
                allowed=(2,))
    assert not out.exists() and not leftovers(tmp_path)


@pytest.mark.parametrize("name", corpus("target"))
def test_target(kit: dict[str, Any], name: str) -> None:
    STATS.files["corpus target"] += 1
    run_cli("corpus-target", "simulate", kit["tiny"], "--level", "0", "--target",
            BAD / "target" / name, allowed=(2,))


@pytest.mark.parametrize("name", corpus("log"))
def test_log(kit: dict[str, Any], name: str, tmp_path: Path) -> None:
    STATS.files["corpus log"] += 1
    path = BAD / "log" / name
    run_cli("corpus-log", "log", "show", path, allowed=(0, 2))
    out = tmp_path / "best.jsonl"
    r = run_cli("corpus-log", "distill", "-i", path, "-o", out, allowed=(0, 2))
    assert out.exists() == (r.exit_code == 0) and not leftovers(tmp_path)
    run_cli("corpus-log", "compile", kit["tiny"], "--log", path, "--strict",
            "-o", tmp_path / "x.stcobj", allowed=(2,))
    assert not (tmp_path / "x.stcobj").exists()
    page = tmp_path / "report.html"
    r = run_cli("corpus-log", "report", path, "-o", page, allowed=(0, 2))
    assert page.exists() == (r.exit_code == 0) and not leftovers(tmp_path)


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Paths handed to TVM's library loader while the test runs."""
    import tvm

    seen: list[str] = []
    real = tvm.runtime.load_module

    def spy(path: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(tvm.runtime, "load_module", spy)
    return seen


@pytest.mark.parametrize("name", corpus("stcobj"))
def test_artifact(kit: dict[str, Any], name: str, loads: list[str]) -> None:
    STATS.files["corpus stcobj"] += 1
    run_cli("corpus-stcobj", "run", BAD / "stcobj" / name, allowed=(2,))
    if name not in CHECKSUM_MATCHES:
        assert loads == [], f"{name}: a library was handed to the loader"


@pytest.mark.parametrize("name", corpus("npy"))
def test_npy_input(kit: dict[str, Any], name: str, loads: list[str]) -> None:
    STATS.files["corpus npy"] += 1
    for slot in ("feat_value", "feat_index"):
        run_cli("corpus-npy", "run", kit["art"], "--input", f"{slot}={BAD / 'npy' / name}",
                allowed=(2,))
    assert loads == []  # refused before the artifact's library was even loaded


# ---- big files, made at test time rather than committed ----------------------------------------
def test_big_files(kit: dict[str, Any], tmp_path: Path) -> None:
    STATS.files["corpus big (made here)"] += 5
    d = kit["schedules"][0].to_json()
    big = tmp_path / "big.json"
    big.write_text(json.dumps(d) + " " * (9 << 20))  # valid JSON, 9 MiB
    run_cli("corpus-big", "simulate", kit["tiny"], "--schedule", big, allowed=(2,))
    d["groups"][0]["chunks"] = [{"mem_scope": "DDR", "core_bind": [0]}] * 100_000
    many = tmp_path / "chunks.json"
    many.write_text(json.dumps(d))
    run_cli("corpus-big", "simulate", kit["tiny"], "--schedule", many, allowed=(2,))
    long_line = tmp_path / "long.jsonl"
    long_line.write_bytes(b'{"v": "1.0", "pad": "' + b"x" * (20 << 20) + b'"}\n')
    run_cli("corpus-big", "log", "show", long_line, allowed=(2,))
    toml = tmp_path / "big.toml"
    toml.write_text(kit["toml_text"] + "#" * (2 << 20))
    run_cli("corpus-big", "simulate", kit["tiny"], "--level", "0", "--target", toml, allowed=(2,))
    members = tmp_path / "members.stcobj"
    with zipfile.ZipFile(members, "w") as zf:
        for i in range(5000):
            zf.writestr(f"m{i}", b"")
    run_cli("corpus-big", "run", members, allowed=(2,))


# ---- the console script: what reaches descriptor 2 ---------------------------------------------
def test_representative_files_through_the_console_script(kit: dict[str, Any]) -> None:
    cases = [
        ("info", BAD / "onnx" / "constant_of_shape_1e12.onnx"),
        ("run", BAD / "stcobj" / "lib_not_a_library.stcobj"),
        ("simulate", kit["tiny"], "--schedule", BAD / "schedule" / "ops_5e7.json"),
        ("log", "show", BAD / "log" / "forged_crc_deep_schedule.jsonl"),
    ]
    procs = [subprocess.Popen([str(SCRIPT), *map(str, args)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for args in cases]
    for args, proc in zip(cases, procs):
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 2, (args, out, err)
        # Progress lines appear off a terminal once a command has run 5 s (importing
        # TVM can take that long on a loaded machine); anything else is the error.
        lines = [ln for ln in err.strip().splitlines() if not PROGRESS.match(ln)]
        assert len(lines) == 1 and lines[0].startswith("graphtune: error: "), (args, err)
        assert out == "", (args, out)

"""Every kind of output path, for every command that writes a file.

A path is one of :data:`KINDS` (a new file, an existing one, a directory, a
FIFO, a device, links to files, to directories, to nowhere, to the command's own
input, a missing or pseudo-file-system directory, a name too long...). The
command must either write a complete file where the path leads (a symbolic
link is followed and kept) or exit 2 with one line having changed nothing:
same names, same file types, same contents, no temporary file left. Then
hypothesis draws file names for the cheap writers.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz._harness import STATS, fresh_dir, leftovers, remove_tree, run_cli
from tests.fuzz.conftest import examples

ROOT_USER = os.geteuid() == 0


def _onnx(p: Path) -> None:
    assert onnx.load(str(p)).graph.node


def _json(p: Path) -> None:
    import json

    json.loads(p.read_text())


def _npz(p: Path) -> None:
    with np.load(p) as f:
        assert f.files


def _jsonl(p: Path) -> None:
    from logs import read_records

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(read_records(p))


def _html(p: Path) -> None:
    import xml.etree.ElementTree as ET

    assert ET.fromstring(p.read_text(encoding="utf-8").split("\n", 1)[1]).tag == "html"


def _journal(p: Path) -> None:
    import json

    ops = [json.loads(line) for line in p.read_text().splitlines()]
    assert ops and all("op_code" in op for op in ops)


def _stcobj(p: Path) -> None:
    from compiler.artifact import read_meta

    assert read_meta(p).model


# command name -> (argv builder given (case dir, output path), checker of a written output)
Cmd = tuple[Callable[[Path, Path], list[object]], Callable[[Path], None]]
COMMANDS: dict[str, Cmd] = {
    "zoo": (lambda d, p: ["zoo", "tiny_cnn", "--option", "image_size=8", "-o", p], _onnx),
    "schedule make": (lambda d, p: ["schedule", "make", d / "tiny.onnx", "--level", "0",
                                    "--target", d / "t.toml", "-o", p], _json),
    "schedule make --onnx": (lambda d, p: ["schedule", "make", d / "tiny.onnx", "--level", "0",
                                           "-o", d / "s_out.json", "--onnx", p], _onnx),
    "schedule export": (lambda d, p: ["schedule", "export", d / "o0.json", "--model",
                                      d / "tiny.onnx", "--onnx", p], _onnx),
    "simulate --trace": (lambda d, p: ["simulate", d / "tiny.onnx", "--schedule", d / "o0.json",
                                       "--trace", p], _json),
    "run -o": (lambda d, p: ["run", d / "dfm.stcobj", "--input", f"feat_index={d / 'ids.npy'}",
                             "-o", p], _npz),
    "distill -o": (lambda d, p: ["distill", "-i", d / "log.jsonl", "-o", p], _jsonl),
    "compile -o": (lambda d, p: ["compile", d / "tiny.onnx", "--log", d / "log.jsonl",
                                 "--strict", "-o", p], _stcobj),
    "report -o": (lambda d, p: ["report", d / "log.jsonl", "-o", p], _html),
    # A study journal is appended to, not replaced: the same kinds, other expectations.
    "tune --storage": (lambda d, p: ["tune", d / "tiny.onnx", "--trials", "1", "--log",
                                     d / "t.jsonl", "--workers", "0", "--storage", p], _journal),
}
# The input each command may not overwrite (distill merges its output, so it may).
INPUT = {"zoo": None, "schedule make": "tiny.onnx", "schedule make --onnx": "tiny.onnx",
         "schedule export": "o0.json", "simulate --trace": "o0.json", "run -o": "dfm.stcobj",
         "distill -o": None, "compile -o": "tiny.onnx", "report -o": "log.jsonl",
         "tune --storage": "tiny.onnx"}
# What a command writes besides its output (the tuning log and curve; the claims file
# beside a shared journal).
ALSO_WRITES = {"tune --storage": ("t.jsonl", "t.curve.png", "t.summary.json", "{out}.claims")}
SLOW_TO_SUCCEED = {"compile -o"}  # a build: only the "new" kind is run to completion


def _make(kind: str, d: Path, command: str) -> tuple[Path, bool]:
    """Create the situation; returns (output path, whether writing there must succeed)."""
    inp = INPUT[command]
    # distill merges an existing output, so it must be a log; a study journal is appended
    # to, so it must be one (an empty file is an empty journal); others replace anything.
    old = {"distill -o": (d / "log.jsonl").read_bytes(),
           "tune --storage": b""}.get(command, b"old contents")
    if kind == "new":
        return d / "out.file", True
    if kind == "existing":
        (d / "out.file").write_bytes(old)
        return d / "out.file", True
    if kind == "readonly":
        (d / "out.file").write_bytes(old)
        (d / "out.file").chmod(0o444)
        return d / "out.file", ROOT_USER  # root may write a read-only file, as with open()
    if kind == "directory":
        (d / "sub").mkdir()
        return d / "sub", False
    if kind == "fifo":
        os.mkfifo(d / "fifo")
        return d / "fifo", False
    if kind == "symlink_file":
        (d / "real.file").write_bytes(old)
        (d / "link").symlink_to(d / "real.file")
        return d / "link", True
    if kind == "symlink_dir":
        (d / "sub").mkdir()
        (d / "link").symlink_to(d / "sub")
        return d / "link", False
    if kind == "dangling":
        (d / "link").symlink_to(d / "nowhere" / "x")
        return d / "link", False
    if kind == "loop":
        (d / "a").symlink_to(d / "b")
        (d / "b").symlink_to(d / "a")
        return d / "a", False
    if kind in ("dev_null", "dev_full"):
        return Path("/dev/" + kind[4:]), False
    if kind == "missing_dir":
        return d / "no" / "such" / "out.file", False
    if kind == "file_as_dir":
        (d / "plain").write_bytes(b"x")
        return d / "plain" / "out.file", False
    if kind == "proc":
        return Path("/proc/graphtune-fuzz/out.file"), False
    if kind == "too_long":
        return d / ("x" * 300), False
    if kind == "empty":
        return Path(""), False
    if kind == "dotdot":
        (d / "sub").mkdir()
        return d / "sub" / ".." / "out.file", True
    if kind == "odd_name":
        return d / "o u\tt é\u202e.file", True
    # A command with no input file (zoo) may replace log.jsonl; distill merges into it.
    if kind == "the_input":
        return d / (inp or "log.jsonl"), inp is None
    if kind == "hardlink_input":
        os.link(d / (inp or "log.jsonl"), d / "hard")
        return d / "hard", inp is None
    if kind == "symlink_input":
        (d / "link").symlink_to(d / (inp or "log.jsonl"))
        return d / "link", inp is None
    raise AssertionError(kind)


KINDS = ["new", "existing", "readonly", "directory", "fifo", "symlink_file", "symlink_dir",
         "dangling", "loop", "dev_null", "dev_full", "missing_dir", "file_as_dir", "proc",
         "too_long", "empty", "dotdot", "odd_name", "the_input", "hardlink_input",
         "symlink_input"]


def _snapshot(d: Path) -> dict[str, tuple[int, str]]:
    out = {}
    for p in sorted(d.rglob("*")):
        st_ = os.lstat(p)
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(st_.st_mode) else ""
        out[str(p.relative_to(d))] = (stat.S_IFMT(st_.st_mode), digest)
    return out


@pytest.fixture(scope="module")
def inputs(kit: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files every case starts from (copied into each case's own directory)."""
    d = tmp_path_factory.mktemp("fuzz-outputs-inputs")
    shutil.copy(kit["tiny"], d / "tiny.onnx")
    shutil.copy(kit["o0"], d / "o0.json")
    shutil.copy(kit["art"], d / "dfm.stcobj")
    shutil.copy(kit["ids"], d / "ids.npy")
    shutil.copy(kit["log"], d / "log.jsonl")
    (d / "t.toml").write_text(kit["toml_text"])
    return d


def _case(inputs: Path, root: Path, command: str, kind: str) -> None:
    d = fresh_dir(root, "case")
    try:
        for p in inputs.iterdir():
            shutil.copy(p, d / p.name)
        out, must_succeed = _make(kind, d, command)
        if must_succeed and command in SLOW_TO_SUCCEED and kind != "new":
            return
        STATS.files[f"output path ({kind})"] += 1
        before = _snapshot(d)
        special = {p: stat.S_IFMT(os.lstat(p).st_mode) for p in (Path("/dev/null"), Path("/dev/full"))}
        build, check = COMMANDS[command]
        r = run_cli("output", *build(d, out), allowed=(0,) if must_succeed else (2,))
        assert not leftovers(d)
        assert not (d / "sub").is_dir() or not leftovers(d / "sub")
        for p, mode in special.items():
            assert stat.S_IFMT(os.lstat(p).st_mode) == mode
        if r.exit_code == 2:
            assert _snapshot(d) == before, f"{command} {kind}: a failed command changed files"
            return
        real = Path(os.path.realpath(out))
        check(real)
        if out.is_symlink():
            assert before[str(out.relative_to(d))][0] == stat.S_IFLNK  # the link is kept
        changed = {k for k, v in _snapshot(d).items() if before.get(k) != v}
        allowed = {str(real.relative_to(d.resolve()))}
        if command == "schedule make --onnx":
            allowed.add("s_out.json")
        allowed |= {str(Path(os.path.relpath(real.parent, d.resolve())) / name.format(
            out=real.name)) if "{out}" in name else name for name in ALSO_WRITES.get(command, ())}
        assert changed <= allowed, (command, kind, changed)
    finally:
        for p in d.rglob("*"):
            if p.is_file() and not p.is_symlink():
                p.chmod(0o644)
        remove_tree(d)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_output_kind(inputs: Path, tmp_path: Path, command: str, kind: str) -> None:
    _case(inputs, tmp_path, command, kind)


NAME = st.one_of(
    st.text(min_size=1, max_size=40).filter(lambda s: "/" not in s and "\x00" not in s),
    st.sampled_from(["-", "--", "-o", ".", "..", "...", " ", ".hidden", "a" * 255, "a" * 256,
                     "x.tmp", "\n", "*", "~", "$HOME", "con"]),
)


@pytest.mark.parametrize("command", ["zoo", "distill -o", "run -o"])
def test_generated_file_names(inputs: Path, tmp_path_factory: pytest.TempPathFactory,
                              command: str) -> None:
    root = tmp_path_factory.mktemp("names")
    build, check = COMMANDS[command]

    @examples(50)
    @given(name=NAME)
    def case(name: str) -> None:
        d = fresh_dir(root, "case")
        try:
            for p in inputs.iterdir():
                shutil.copy(p, d / p.name)
            STATS.files["output path (generated name)"] += 1
            before = _snapshot(d)
            out = d / name
            r = run_cli("output-name", *build(d, out))
            assert not leftovers(d) or name.endswith(".tmp")
            if r.exit_code == 2:
                assert _snapshot(d) == before
            else:
                check(Path(os.path.realpath(out)))
        finally:
            remove_tree(d)

    case()

"""Generated hostile files of every kind a user hands graphtune, through the CLI in-process.

Each example is one file; the command that reads its kind must end cleanly
(see :mod:`tests.fuzz._harness`): exit 0 if the file happens to be fine, else
exit 2 with one line, in bounded time and memory, leaving no file behind.
Where a file is accepted, the value it produced is used further (a schedule is
validated and simulated, a target simulates a schedule, a log answers a
compile-time lookup, an artifact runs), so acceptance is checked too.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from compiler.errors import GraphtuneError
from tests.fuzz._harness import STATS, bounded, fresh_dir, leftovers, remove_tree, run_cli
from tests.fuzz._strategies import (
    JSONISH,
    dumps,
    mutated_bytes,
    mutated_json,
    scaled_numbers,
    to_toml,
)
from tests.fuzz.conftest import examples


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-inputs")


def _write(root: Path, name: str, data: bytes | str) -> tuple[Path, Path]:
    STATS.files[name.rsplit(".", 1)[-1]] += 1
    d = fresh_dir(root, "case")
    path = d / name
    path.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    return d, path


# ---- schedule JSON ---------------------------------------------------------------------------
def _schedule_docs(kit: dict[str, Any]) -> st.SearchStrategy[bytes]:
    docs = [s.to_json() for s in kit["schedules"].values()]
    as_json = st.one_of(st.sampled_from(docs).flatmap(mutated_json),
                        st.sampled_from(docs).flatmap(scaled_numbers)).map(
        lambda d: dumps(d).encode())
    texts = st.sampled_from([json.dumps(d).encode() for d in docs]).flatmap(mutated_bytes)
    return st.one_of(as_json, as_json, as_json, texts, JSONISH.map(lambda v: dumps(v).encode()),
                     st.binary(max_size=200))


@pytest.mark.parametrize("seed", [0])
def test_schedule_files(kit: dict[str, Any], scratch: Path, seed: int) -> None:
    from compiler.schedule import GraphSchedule
    from sim import SimError, SimResult, simulate

    graph, target = kit["graph"], kit["target"]

    @examples(400)
    @given(data=_schedule_docs(kit))
    def case(data: bytes) -> None:
        d, path = _write(scratch, "s.json", data)
        try:
            run_cli("schedule", "schedule", "show", path)
            with bounded(f"schedule in-process: {data[:80]!r}"):
                try:
                    s = GraphSchedule.load(path)
                    s.validate(graph, target)
                except GraphtuneError:
                    return
                result = simulate(graph, s, target)
                assert isinstance(result, SimResult | SimError)
            STATS.accepted["schedule"] += 1
        finally:
            assert not leftovers(d)
            remove_tree(d)

    case()


# ---- target TOML -----------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0])
def test_target_files(kit: dict[str, Any], scratch: Path, seed: int) -> None:
    from compiler.target import Target
    from sim import SimError, SimResult, simulate

    graph, base = kit["graph"], kit["target"].to_dict()
    schedule = kit["schedules"][0]
    text = st.one_of(
        st.just(base).flatmap(scaled_numbers).map(to_toml).map(str.encode),
        st.just(base).flatmap(scaled_numbers).map(to_toml).map(str.encode),
        st.just(base).flatmap(lambda b: mutated_json(b, 4)).map(
            lambda doc: to_toml(doc) if isinstance(doc, dict) else dumps(doc)).map(str.encode),
        st.just(kit["toml_text"].encode()).flatmap(mutated_bytes),
        st.binary(max_size=200),
    )

    @examples(250)
    @given(data=text)
    def case(data: bytes) -> None:
        d, path = _write(scratch, "t.toml", data)
        try:
            run_cli("target", "schedule", "show", kit["o0"], "--target", path)
            with bounded(f"target in-process: {data[:80]!r}"):
                try:
                    t = Target.from_file(path)
                    schedule.validate(graph, t)
                except GraphtuneError:
                    return
                assert isinstance(simulate(graph, schedule, t), SimResult | SimError)
            STATS.accepted["target"] += 1
        finally:
            remove_tree(d)

    case()


# ---- tuning logs -----------------------------------------------------------------------------
def _log_lines(kit: dict[str, Any]) -> st.SearchStrategy[bytes]:
    good = kit["log"].read_bytes().splitlines(keepends=True)
    records = [json.loads(line) for line in good]

    def line_of(doc: Any, crc: bool) -> bytes:
        text = json.dumps(doc, separators=(",", ":"))
        if crc and text.endswith("}") and isinstance(doc, dict):
            import zlib

            body = text[:-1]
            text = body + f',"crc32":{zlib.crc32(body.encode("utf-8", "surrogatepass"))}' + "}"
        return text.encode("utf-8", "surrogatepass") + b"\n"

    one = st.one_of(
        st.sampled_from(good),
        st.builds(line_of, st.sampled_from(records).flatmap(mutated_json), st.booleans()),
        st.sampled_from(good).flatmap(mutated_bytes),
        st.binary(max_size=120).map(lambda b: b + b"\n"),
        st.just(b"\n"),
    )
    return st.lists(one, min_size=0, max_size=5).map(b"".join)


@pytest.mark.parametrize("seed", [0])
def test_log_files(kit: dict[str, Any], scratch: Path, seed: int) -> None:
    import warnings

    from autotune import ApplyHistoryBest
    from compiler.schedule import GraphSchedule
    from logs import read_records

    graph, target = kit["graph"], kit["target"]

    @examples(220)
    @given(data=_log_lines(kit), distill=st.booleans())
    def case(data: bytes, distill: bool) -> None:
        d, path = _write(scratch, "log.jsonl", data)
        try:
            run_cli("log", "log", "show", path)
            if distill:
                out = d / "best.jsonl"
                r = run_cli("log", "distill", "-i", path, "-o", out)
                assert out.exists() == (r.exit_code == 0)
                if out.exists():
                    with warnings.catch_warnings():
                        warnings.simplefilter("error")  # distill writes only whole records
                        list(read_records(out))
            with bounded(f"log lookup in-process: {data[:80]!r}"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    with ApplyHistoryBest(path) as ctx:
                        found = ctx.query(graph.workload_key, target.key)
                    if found is not None:
                        GraphSchedule.from_json(found).validate(graph, target)
                except GraphtuneError:
                    return
            STATS.accepted["log"] += 1
        finally:
            assert not leftovers(d)
            remove_tree(d)

    case()


# ---- .stcobj artifacts -----------------------------------------------------------------------
def _rezip(members: dict[str, bytes], method: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _artifacts(kit: dict[str, Any]) -> st.SearchStrategy[bytes]:
    good = kit["art_bytes"]
    with zipfile.ZipFile(io.BytesIO(good)) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    meta = json.loads(members["meta.json"])

    @st.composite
    def structural(draw: st.DrawFn) -> bytes:
        m = dict(members)
        what = draw(st.sampled_from(["meta", "lib", "drop", "add", "schedule"]))
        if what == "meta":
            # A changed meta.json travels with a library that does not match it, so the
            # library is never loaded (a hand-edited pair is trusted as the code is).
            m["meta.json"] = dumps(draw(mutated_json(meta))).encode()
            m["lib.so"] = draw(st.binary(max_size=64))
        elif what == "lib":
            m["lib.so"] = draw(mutated_bytes(members["lib.so"][:4096]))
        elif what == "drop":
            m.pop(draw(st.sampled_from(sorted(m))))
        elif what == "add":
            m[draw(st.text(min_size=1, max_size=20))] = draw(st.binary(max_size=32))
        else:
            m["schedule.json"] = draw(st.binary(max_size=64))
        method = draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED,
                                       zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA]))
        return _rezip(m, method)

    return st.one_of(st.just(good).flatmap(mutated_bytes), structural(), st.binary(max_size=300))


@pytest.mark.parametrize("seed", [0])
def test_artifact_files(kit: dict[str, Any], scratch: Path, seed: int,
                        monkeypatch: pytest.MonkeyPatch) -> None:
    import tvm

    with zipfile.ZipFile(kit["art"]) as zf:
        good_lib = hashlib.sha256(zf.read("lib.so")).hexdigest()
    real = tvm.runtime.load_module

    def only_the_real_library(path: str, *args: Any, **kwargs: Any) -> Any:
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        assert digest == good_lib, "a library that is not the compiled one reached the loader"
        STATS.accepted["stcobj (library loaded)"] += 1
        return real(path, *args, **kwargs)

    monkeypatch.setattr(tvm.runtime, "load_module", only_the_real_library)

    @examples(160)
    @given(data=_artifacts(kit))
    def case(data: bytes) -> None:
        d, path = _write(scratch, "a.stcobj", data)
        try:
            run_cli("stcobj", "run", path, "-o", d / "out.npz")
        finally:
            assert not leftovers(d)
            remove_tree(d)

    case()


# ---- ONNX ------------------------------------------------------------------------------------
def _onnx_files(kit: dict[str, Any]) -> st.SearchStrategy[bytes]:
    import onnx

    proto = onnx.load_from_string(kit["tiny_bytes"])

    @st.composite
    def edited(draw: st.DrawFn) -> bytes:
        p = onnx.ModelProto()
        p.CopyFrom(proto)
        node = p.graph.node[draw(st.integers(0, len(p.graph.node) - 1))]
        what = draw(st.sampled_from(["attr", "dims", "op", "drop", "input"]))
        ints = [a for a in node.attribute if a.ints or a.type == onnx.AttributeProto.INT]
        if what == "attr" and ints:
            a = draw(st.sampled_from(ints))
            if a.ints:
                a.ints[draw(st.integers(0, len(a.ints) - 1))] = draw(
                    st.integers(-(2**40), 2**40))
            else:
                a.i = draw(st.integers(-(2**40), 2**40))
        elif what == "dims":
            vi = draw(st.sampled_from(list(p.graph.input)))
            dims = vi.type.tensor_type.shape.dim
            if dims:
                dims[draw(st.integers(0, len(dims) - 1))].dim_value = draw(
                    st.sampled_from([0, 1, 3, 1000, 2**20, 2**31]))
        elif what == "op":
            node.op_type = draw(st.sampled_from(["Relu", "Add", "Conv", "MatMul", "Softmax",
                                                 "Reshape", "Gather", "Identity", "Nope"]))
        elif what == "drop":
            p.graph.node.remove(node)
        else:
            if node.input:
                node.input[draw(st.integers(0, len(node.input) - 1))] = draw(
                    st.sampled_from(["", "input", "missing", node.output[0]]))
        return p.SerializeToString()

    return st.one_of(edited(), st.just(kit["tiny_bytes"]).flatmap(mutated_bytes),
                     st.binary(max_size=200))


@pytest.mark.parametrize("seed", [0])
def test_onnx_files(kit: dict[str, Any], scratch: Path, seed: int) -> None:
    @examples(90)
    @given(data=_onnx_files(kit), batch=st.sampled_from([None, None, 1, 3]))
    def case(data: bytes, batch: int | None) -> None:
        d, path = _write(scratch, "m.onnx", data)
        try:
            run_cli("onnx", "info", path, *(["--batch", str(batch)] if batch else []))
        finally:
            remove_tree(d)

    case()


# ---- .npy inputs -----------------------------------------------------------------------------
@st.composite
def _npy(draw: st.DrawFn) -> bytes:
    if draw(st.booleans()):  # a real array, any dtype and shape
        shape = draw(st.sampled_from([(4, 39), (4, 39), (39, 4), (4,), (), (0, 39), (4, 39, 1)]))
        dtype = draw(st.sampled_from(["float32", "float16", "float64", "int64", "int32", "uint8",
                                      "bool", "complex64", "U3", "S2", "V4"]))
        arr = np.zeros(shape, dtype=dtype)
        if arr.dtype.kind in "iu":
            fill = draw(st.sampled_from([0, 5, 258, 259, -1, -259, -260, 2**31 - 1]))
            arr = np.full(shape, fill, dtype=np.int64).astype(dtype)  # wraps for small types
        buf = io.BytesIO()
        np.save(buf, arr)
        return draw(st.one_of(st.just(buf.getvalue()), mutated_bytes(buf.getvalue(), 2)))
    header = "{" + ", ".join([
        f"'descr': {draw(st.sampled_from(['<f4', '<i8', '|O', '<U5', '>f8', 'V8', 'foo']))!r}",
        f"'fortran_order': {draw(st.booleans())}",
        f"'shape': {draw(st.lists(st.sampled_from([0, 1, 4, 39, 2**31, 10**12]), max_size=4))!r}"
        .replace("[", "(").replace("]", ",)"),
    ]) + "}"
    raw = header.encode() + b" " * (63 - len(header) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(raw).to_bytes(2, "little") + raw + draw(
        st.binary(max_size=64))


@pytest.mark.parametrize("seed", [0])
def test_npy_inputs(kit: dict[str, Any], scratch: Path, seed: int) -> None:
    @examples(100)
    @given(data=_npy(), slot=st.sampled_from(["feat_index", "feat_value"]))
    def case(data: bytes, slot: str) -> None:
        d, path = _write(scratch, "x.npy", data)
        try:
            run_cli("npy", "run", kit["art"], "--input", f"{slot}={path}")
        finally:
            remove_tree(d)

    case()

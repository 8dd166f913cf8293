"""Write the corpus of hand-made bad files in ``tests/data/bad/`` (run from the repo root).

Every file here is something a user could hand graphtune by mistake or a
damaged/hostile copy of a real one; ``tests/fuzz/test_corpus.py`` feeds each to
the command that reads its kind and expects exit status 2 with one line. The
files are committed; this script documents how each was made and rewrites them
(``python tests/data/make_bad_files.py``). Big cases (a 9 MiB schedule, a
zip with a million entries) are made at test time instead of committed.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).parent / "bad"
RANDOM = np.random.default_rng(14).integers(0, 256, 4096, dtype=np.uint8).tobytes()


def write(kind: str, name: str, data: bytes | str) -> None:
    path = OUT / kind / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def tiny_onnx() -> bytes:
    from compiler import zoo

    return zoo.build("tiny_cnn", batch=2, weights="inputs", image_size=16).SerializeToString()


def small_model(nodes: list, inputs: list, outputs: list, inits: list | None = None,
                opset: int = 17) -> bytes:
    g = helper.make_graph(nodes, "bad", inputs, outputs, inits or [])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def vi(name: str, shape: list, dtype: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def onnx_files() -> None:
    good = tiny_onnx()
    write("onnx", "empty.onnx", b"")
    write("onnx", "random_bytes.onnx", RANDOM)
    write("onnx", "truncated_half.onnx", good[: len(good) // 2])
    write("onnx", "truncated_one_byte.onnx", good[:-1] if good[-1:] else good)
    write("onnx", "text.onnx", "this is not a model\n")
    write("onnx", "schedule_json.onnx", '{"kind": "graphtune.GraphSchedule", "v": 1}')
    write("onnx", "zip.onnx", _zip({"a.txt": b"x"}))
    write("onnx", "no_nodes.onnx", small_model([], [vi("x", [1])], [vi("x", [1])]))
    write("onnx", "unsupported_op.onnx", small_model(
        [helper.make_node("FrobnicateTensor", ["x"], ["y"], domain="")], [vi("x", [2, 2])],
        [vi("y", [2, 2])]))
    write("onnx", "dangling_input.onnx", small_model(
        [helper.make_node("Relu", ["nowhere"], ["y"])], [vi("x", [2])], [vi("y", [2])]))
    write("onnx", "cycle.onnx", small_model(
        [helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])],
        [vi("x", [2])], [vi("b", [2])]))
    write("onnx", "opset_999.onnx", small_model(
        [helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])], opset=999))
    write("onnx", "symbolic_batch_only.onnx", small_model(
        [helper.make_node("Relu", ["x"], ["y"])], [vi("x", ["N", 4])], [vi("y", ["N", 4])]))
    # A ConstantOfShape asking for 10^12 elements: must not be materialised.
    shape = numpy_helper.from_array(np.array([1_000_000, 1_000_000], np.int64), "shape")
    write("onnx", "constant_of_shape_1e12.onnx", small_model(
        [helper.make_node("ConstantOfShape", ["shape"], ["c"]),
         helper.make_node("Add", ["x", "c"], ["y"])],
        [vi("x", [1])], [vi("y", [1_000_000, 1_000_000])], [shape]))
    for loc, name in (("/dev/zero", "external_absolute.onnx"),
                      ("../../../../etc/passwd", "external_escape.onnx"),
                      ("missing.bin", "external_missing.onnx")):
        t = numpy_helper.from_array(np.zeros(4, np.float32), "w")
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", loc), ("length", str(10**11))):
            e = t.external_data.add()
            e.key, e.value = key, value
        write("onnx", name, small_model([helper.make_node("Add", ["x", "w"], ["y"])],
                                        [vi("x", [4])], [vi("y", [4])], [t]))
    # The batch is fixed by a Reshape: `--batch 3` cannot import (tested with --batch).
    fixed = numpy_helper.from_array(np.array([2, 16], np.int64), "shape")
    write("onnx", "fixed_batch.onnx", small_model(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])], [vi("x", [2, 4, 4])],
        [vi("y", [2, 16])], [fixed]))


def schedule_files() -> None:
    base = {"kind": "graphtune.GraphSchedule", "v": 1, "batch": 2, "workload_key": None,
            "source": "corpus", "transfers": [], "order": [["g", "g0", 0]],
            "groups": [{"name": "g0", "ops": [[0, 15]], "split": 1,
                        "chunks": [{"mem_scope": "DDR", "core_bind": [0]}]}]}

    def edit(name: str, change: object) -> None:
        d = json.loads(json.dumps(base))
        change(d)  # type: ignore[operator]
        write("schedule", name, json.dumps(d))

    write("schedule", "empty.json", b"")
    write("schedule", "binary.json", RANDOM)
    write("schedule", "utf16.json", json.dumps(base).encode("utf-16"))
    write("schedule", "deep_nesting.json", "[" * 100_000)
    write("schedule", "deep_nesting_valid.json", "[" * 900 + "]" * 900)
    write("schedule", "null.json", "null")
    write("schedule", "list.json", "[1, 2, 3]")
    write("schedule", "nan.json", json.dumps(base).replace('"batch": 2', '"batch": NaN'))
    write("schedule", "infinity.json", json.dumps(base).replace('"batch": 2', '"batch": Infinity'))
    write("schedule", "split_5000_digits.json",
          json.dumps(base).replace('"split": 1', '"split": ' + "7" * 5000))
    write("schedule", "batch_4000_digits.json",
          json.dumps(base).replace('"batch": 2', '"batch": ' + "7" * 4000))
    write("schedule", "trailing_garbage.json", json.dumps(base) + "}}}")
    write("schedule", "version_string.json", json.dumps(base).replace('"v": 1', '"v": "1.0"'))
    write("schedule", "version_99.json", json.dumps(base).replace('"v": 1', '"v": 99'))
    write("schedule", "log_record.json", '{"v": "1.0", "workload": {"key": "k", "batch": 1}}')
    edit("mem_scope_5.json", lambda d: d["groups"][0]["chunks"][0].update(mem_scope=5))
    edit("mem_scope_negative.json", lambda d: d["groups"][0]["chunks"][0].update(mem_scope=-1))
    edit("mem_scope_list.json", lambda d: d["groups"][0]["chunks"][0].update(mem_scope=["L1"]))
    edit("ops_1e12.json", lambda d: d["groups"][0].update(ops=[[0, 10**12]]))
    edit("ops_5e7.json", lambda d: d["groups"][0].update(ops=[[16, 5 * 10**7]]))
    edit("ops_float.json", lambda d: d["groups"][0].update(ops=[[0, 1e12]]))
    edit("ops_reversed.json", lambda d: d["groups"][0].update(ops=[[15, 0]]))
    edit("ops_negative.json", lambda d: d["groups"][0].update(ops=[[-5, 3]]))
    edit("ops_many_ranges.json", lambda d: d["groups"][0].update(ops=[[0, 100_000]] * 50))
    edit("ops_triple.json", lambda d: d["groups"][0].update(ops=[[0, 1, 2]]))
    edit("split_zero.json", lambda d: d["groups"][0].update(split=0))
    edit("split_huge.json", lambda d: d["groups"][0].update(split=10**15))
    edit("split_bool.json", lambda d: d["groups"][0].update(split=True))
    edit("core_huge.json", lambda d: d["groups"][0]["chunks"][0].update(core_bind=[10**18]))
    edit("core_negative.json", lambda d: d["groups"][0]["chunks"][0].update(core_bind=[[-1]]))
    edit("core_bind_empty.json", lambda d: d["groups"][0]["chunks"][0].update(core_bind=[]))
    edit("core_bind_deep.json", lambda d: d["groups"][0]["chunks"][0].update(
        core_bind=[[[[[0]]]]]))
    edit("chunks_not_list.json", lambda d: d["groups"][0].update(chunks={"0": "DDR"}))
    edit("order_step_bad.json", lambda d: d.update(order=[["x", "g0", 0]]))
    edit("order_chunk_huge.json", lambda d: d.update(order=[["g", "g0", 10**30]]))
    edit("batch_zero.json", lambda d: d.update(batch=0))
    edit("batch_huge.json", lambda d: d.update(batch=2**62))
    edit("name_not_string.json", lambda d: d["groups"][0].update(name={"a": 1}))
    edit("name_huge.json", lambda d: d["groups"][0].update(name="g" * 100_000))
    edit("groups_missing.json", lambda d: d.pop("groups"))
    edit("transfer_bad_kind.json", lambda d: d.update(transfers=[{
        "name": "t", "kind": "merge", "tensor": "x", "src_factor": 1, "dst_factor": 2,
        "src_chunks": [0], "dst_chunks": [0, 1], "mem_scope": "L1", "core_bind": [0]}]))
    edit("transfer_factor_huge.json", lambda d: d.update(transfers=[{
        "name": "t", "kind": "split", "tensor": "x", "src_factor": 1, "dst_factor": 10**9,
        "src_chunks": [0], "dst_chunks": [0], "mem_scope": "L1", "core_bind": [0]}]))
    edit("op_out_of_model.json", lambda d: d["groups"][0].update(ops=[[0, 200_000]]))


def target_files() -> None:
    from compiler.target import Target

    text = (Path(__file__).resolve().parents[2] / "compiler" / "targets" / "stcp920.toml").read_text()
    assert Target.from_toml(text)

    def sub(name: str, old: str, new: str) -> None:
        assert old in text, old
        write("target", name, text.replace(old, new, 1))

    write("target", "empty.toml", b"")
    write("target", "binary.toml", RANDOM)
    write("target", "utf16.toml", text.encode("utf-16"))
    write("target", "json.toml", '{"name": "STCP920"}')
    write("target", "deep_array.toml", "name = " + "[" * 50_000)
    write("target", "deep_tables.toml", "\n".join("[" + ".".join(["a"] * i) + "]"
                                                  for i in range(1, 400)))
    sub("cores_1e9.toml", "cores_per_cluster = 8", "cores_per_cluster = 1000000000")
    sub("clusters_negative.toml", "clusters = 4", "clusters = -4")
    sub("clock_inf.toml", "clock_hz = ", "clock_hz = inf\nold_clock = ")
    sub("clock_nan.toml", "clock_hz = ", "clock_hz = nan\n# ")
    sub("huge_int_float_key.toml", "bytes_per_cycle = ", "bytes_per_cycle = " + "9" * 400 + "\n#")
    sub("int_as_string.toml", "cores_per_cluster = 8", 'cores_per_cluster = "8"')
    sub("int_as_table.toml", "cores_per_cluster = 8", "cores_per_cluster = {a = 1}")
    sub("name_with_colon.toml", 'name = "STCP920"', 'name = "STCP:920"')
    sub("name_huge.toml", 'name = "STCP920"', 'name = "' + "x" * 10_000 + '"')
    sub("bool_as_int.toml", "broadcast = true", "broadcast = 1")
    sub("mesh_not_tiling.toml", "mesh_rows = 4", "mesh_rows = 3")
    write("target", "missing_section.toml", text.split("[host]")[0])
    write("target", "unknown_key.toml", text + "\n[warp]\nfactor = 9\n")


def _target_hash() -> str:
    """The default target's hash: the log records match tiny_cnn on it (so --log reaches them)."""
    from compiler.target import Target

    return Target.default().hash


def record_line(schedule: object, crc: bool = False, **changes: object) -> str:
    rec = {"v": "1.0",
           "workload": {"key": "962ea7ff2afe65a3ef802c58", "model": "tiny_cnn",
                        "input_shapes": {"input": [2, 3, 16, 16]}, "batch": 2},
           "target": {"chip": "STCP920", "hash": _target_hash()},
           "result": {"status": "ok", "latency_us": 12.5, "throughput_per_s": 1.0, "error": ""},
           "prov": {"measurer": "sim", "measurer_version": "0", "tuner": "corpus", "study": "",
                    "trial": None, "time_unix_s": 1.0, "host": ""}}
    rec.update(changes)
    body = json.dumps(rec, separators=(",", ":"))[:-1] + ',"schedule":' + (
        schedule if isinstance(schedule, str) else json.dumps(schedule, separators=(",", ":")))
    if not crc:
        return body + "}\n"
    import zlib

    return body + f',"crc32":{zlib.crc32(body.encode())}' + "}\n"


def log_files() -> None:
    good = {"kind": "graphtune.GraphSchedule", "v": 1, "batch": 2, "workload_key": None,
            "source": "corpus", "transfers": [], "order": [["g", "group_0", 0]],
            "groups": [{"name": "group_0", "ops": [[0, 15]], "split": 1,
                        "chunks": [{"mem_scope": "DDR", "core_bind": [[0, 1, 2, 3], [4, 5, 6, 7]]}]}]}
    write("log", "empty.jsonl", b"")
    write("log", "binary.jsonl", RANDOM)
    write("log", "onnx_file.jsonl", tiny_onnx())
    write("log", "nul_bytes.jsonl", b"\x00" * 5000 + b"\n")
    write("log", "deep_nesting.jsonl", "[" * 100_000 + "\n")
    write("log", "digits_5000.jsonl", "{" + '"v":' + "1" * 5000 + "}\n")
    write("log", "newer_major.jsonl", record_line(good, v="9.0"))
    write("log", "utf16.jsonl", record_line(good).encode("utf-16"))
    write("log", "only_torn.jsonl", record_line(good)[:80])
    # A line whose CRC matches (so the fast path trusts it) but whose schedule is deep.
    write("log", "forged_crc_deep_schedule.jsonl", record_line("[" * 5000 + "]" * 5000, crc=True))
    bad = json.loads(json.dumps(good))
    bad["groups"][0]["chunks"][0]["mem_scope"] = 5
    write("log", "mem_scope_5_record.jsonl", record_line(bad))
    bad = json.loads(json.dumps(good))
    bad["groups"][0]["ops"] = [[0, 10**12]]
    write("log", "ops_1e12_record.jsonl", record_line(bad))
    write("log", "schedule_string_record.jsonl", record_line("\"not a schedule\""))
    # A CRC anyone can compute: a matching one proves nothing about the header.
    write("log", "forged_crc_status_null.jsonl", record_line(good, crc=True, result={
        "status": None, "latency_us": 13.0, "throughput_per_s": None, "error": ""}))
    write("log", "status_list.jsonl", record_line(good, result={"status": []}))
    write("log", "forged_crc_time_string.jsonl", record_line(good, crc=True, prov={
        "time_unix_s": "yesterday"}))


def _zip(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _meta(**changes: object) -> dict:
    meta = {"kind": "graphtune.stcobj", "format_version": 2, "model": "m", "workload_key": "k",
            "target_key": "STCP920:h", "target_hash": "h", "batch": 1,
            "inputs": [{"name": "x", "shape": [1, 4], "dtype": "float32"}],
            "outputs": [{"name": "y", "shape": [1, 4], "dtype": "float32"}],
            "lib_sha256": "0" * 64, "lib_bytes": 4}
    meta.update(changes)
    return meta


def _artifact(meta: dict, lib: bytes = b"\x7fELF", **extra: bytes) -> bytes:
    members = {"meta.json": json.dumps(meta).encode(), "schedule.json": b"{}", "ir.txt": b"",
               "lib.so": lib, **extra}
    return _zip(members)


def stcobj_files() -> None:
    import hashlib

    lib = b"\x7fELF\x02\x01\x01" + RANDOM  # looks like ELF, is not a library
    ok = _meta(lib_sha256=hashlib.sha256(lib).hexdigest(), lib_bytes=len(lib))
    whole = _artifact(ok, lib)
    write("stcobj", "empty.stcobj", b"")
    write("stcobj", "text.stcobj", "not an artifact\n")
    write("stcobj", "random_bytes.stcobj", RANDOM)
    write("stcobj", "truncated_half.stcobj", whole[: len(whole) // 2])
    write("stcobj", "truncated_tail.stcobj", whole[:-10])
    write("stcobj", "foreign_zip.stcobj", _zip({"word/document.xml": b"<w/>",
                                                "[Content_Types].xml": b"<x/>"}))
    write("stcobj", "missing_lib.stcobj", _zip({"meta.json": json.dumps(ok).encode(),
                                                "schedule.json": b"{}", "ir.txt": b""}))
    # lib.so is not a shared library, but its checksum matches: it is handed to the
    # loader, which refuses it (dlopen of a non-ELF file fails cleanly).
    write("stcobj", "lib_not_a_library.stcobj", whole)
    # The checksum does not match: the library must never be loaded.
    write("stcobj", "lib_checksum_mismatch.stcobj", _artifact(ok, lib[:-1] + b"!"))
    write("stcobj", "lib_size_mismatch.stcobj", _artifact(ok, lib + b"extra"))
    write("stcobj", "format_1_no_checksum.stcobj", _artifact(
        {k: v for k, v in ok.items() if k not in ("lib_sha256", "lib_bytes")} | {"format_version": 1},
        lib))
    write("stcobj", "format_99.stcobj", _artifact(ok | {"format_version": 99}, lib))
    write("stcobj", "meta_not_json.stcobj", _zip({"meta.json": b"{", "schedule.json": b"",
                                                  "ir.txt": b"", "lib.so": lib}))
    write("stcobj", "meta_deep.stcobj", _zip({"meta.json": b"[" * 100_000, "schedule.json": b"",
                                              "ir.txt": b"", "lib.so": lib}))
    write("stcobj", "meta_dtype_object.stcobj", _artifact(_meta(inputs=[
        {"name": "x", "shape": [1], "dtype": "object"}]), lib))
    write("stcobj", "meta_shape_huge.stcobj", _artifact(_meta(inputs=[
        {"name": "x", "shape": [2**31, 2**31], "dtype": "float32"}]), lib))
    write("stcobj", "meta_int_high_negative.stcobj", _artifact(_meta(inputs=[
        {"name": "x", "shape": [1], "dtype": "int64", "int_high": -5}]), lib))
    write("stcobj", "meta_batch_string.stcobj", _artifact(_meta(batch="two"), lib))
    # A deflate bomb: meta.json inflates to 64 MiB of spaces (the file is ~64 kB).
    write("stcobj", "zip_bomb_meta.stcobj", _zip({"meta.json": b" " * (64 << 20),
                                                  "schedule.json": b"", "ir.txt": b"",
                                                  "lib.so": lib}))
    # A deflate bomb in the library: 256 MiB of zeros; meta.json says 16 bytes.
    write("stcobj", "zip_bomb_lib.stcobj", _artifact(_meta(lib_bytes=16), b"\0" * (256 << 20)))
    # The archive's header lies about meta.json's size (a tiny claim, large data).
    write("stcobj", "lying_size.stcobj", _lying_size(_artifact(ok, lib)))
    write("stcobj", "encrypted_member.stcobj", _flag_encrypted(_artifact(ok, lib)))
    write("stcobj", "unknown_compression.stcobj", _set_method(_artifact(ok, lib), 99))
    write("stcobj", "member_path_escape.stcobj", _artifact(ok, lib, **{"../../escape.txt": b"x"}))


def _patch_central(data: bytes, name: bytes, patch: object) -> bytes:
    """Apply ``patch(buf, offset)`` to the local and central headers of member ``name``."""
    buf = bytearray(data)
    for sig in (b"PK\x03\x04", b"PK\x01\x02"):
        start = 0
        while (i := buf.find(sig, start)) >= 0:
            start = i + 4
            name_len_at = i + (26 if sig == b"PK\x03\x04" else 28)
            n = struct.unpack_from("<H", buf, name_len_at)[0]
            name_at = i + (30 if sig == b"PK\x03\x04" else 46)
            if bytes(buf[name_at : name_at + n]) == name:
                patch(buf, i, sig)  # type: ignore[operator]
    return bytes(buf)


def _flag_encrypted(data: bytes) -> bytes:
    def patch(buf: bytearray, i: int, sig: bytes) -> None:
        at = i + (6 if sig == b"PK\x03\x04" else 8)
        struct.pack_into("<H", buf, at, struct.unpack_from("<H", buf, at)[0] | 1)

    return _patch_central(data, b"meta.json", patch)


def _set_method(data: bytes, method: int) -> bytes:
    def patch(buf: bytearray, i: int, sig: bytes) -> None:
        struct.pack_into("<H", buf, i + (8 if sig == b"PK\x03\x04" else 10), method)

    return _patch_central(data, b"meta.json", patch)


def _lying_size(data: bytes) -> bytes:
    def patch(buf: bytearray, i: int, sig: bytes) -> None:
        struct.pack_into("<I", buf, i + (22 if sig == b"PK\x03\x04" else 24), 3)

    return _patch_central(data, b"meta.json", patch)


def npy_files() -> None:
    def npy(arr: np.ndarray, **kw: object) -> bytes:
        buf = io.BytesIO()
        np.save(buf, arr, **kw)  # type: ignore[arg-type]
        return buf.getvalue()

    write("npy", "pickle_object_array.npy", npy(np.array([{"a": 1}, None], dtype=object),
                                                allow_pickle=True))
    write("npy", "text.npy", "1 2 3\n")
    write("npy", "empty.npy", b"")
    good = npy(np.zeros((4, 39), np.float32))
    write("npy", "truncated.npy", good[: len(good) // 2])
    # The header claims 10^12 elements; the file holds 16 bytes.
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000), }"
    header += b" " * (63 - len(header) % 64) + b"\n"
    write("npy", "header_claims_1e12.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header))
          + header + b"\0" * 16)
    write("npy", "header_garbage.npy", b"\x93NUMPY\x01\x00\x10\x00" + b"__import__('os')\n")
    write("npy", "npz_archive.npy", _zip({"x.npy": good}))
    write("npy", "wrong_dtype_strings.npy", npy(np.array([["a"] * 39] * 4)))


if __name__ == "__main__":
    onnx_files()
    schedule_files()
    target_files()
    log_files()
    stcobj_files()
    npy_files()
    total = sum(1 for p in OUT.rglob("*") if p.is_file())
    size = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"wrote {total} files, {size / 1e3:.0f} kB, in {OUT}")

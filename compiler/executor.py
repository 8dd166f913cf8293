"""``Executor``: load a ``.stcobj`` artifact and run it on the host CPU.

The CPU build is the functional model of the NPU: it computes what the chip
would, with the schedule's groups, splits and order in the IR, at CPU speed.
Importing this module does not import TVM; :meth:`Executor.load` does.

Example (the guide's flow)::

    ex = Executor.load_from_stcobj("resnet50.stcobj")
    ex.set_input({"input": images.astype("float16")})   # cast to the model's float32
    probs = ex()[0]
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from compiler.artifact import SCHEDULE, ArtifactMeta, TensorInfo, read_meta, read_text
from compiler.errors import CompileError
from compiler.schedule import GraphSchedule

log = logging.getLogger(__name__)


@contextlib.contextmanager
def native_output_to_log(logger: logging.Logger, level: int = logging.DEBUG) -> Iterator[None]:
    """Route what native code writes to stderr (fd 2) into ``logger`` while inside.

    TVM's C++ runtime prints warnings such as "Scope Saving:" straight to fd 2
    when an executable is exported or loaded; a CLI that promises one line on
    stderr for a user error cannot let them through. Python-level writes to
    stderr made inside the block are captured too, so keep the block narrow.
    """
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no usable fd 2 (embedded interpreters): leave it alone
        yield
        return
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(ValueError, OSError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode("utf-8", "replace")
            for line in text.splitlines():
                if line.strip():
                    logger.log(level, "native: %s", line.rstrip())


def _tensor_to_numpy(value: Any) -> list[np.ndarray]:
    """Flatten a VM result (a Tensor, or nested tuples of them) into numpy arrays."""
    if hasattr(value, "numpy"):
        return [value.numpy()]
    out: list[np.ndarray] = []
    for item in value:
        out.extend(_tensor_to_numpy(item))
    return out


class Executor:
    """A loaded artifact: set inputs, call, get a list of numpy outputs.

    Not thread-safe: inputs are state, as in the guide's ``set_input`` / call
    pair. Load one executor per thread.

    Attributes:
        path: The artifact file.
        meta: Its :class:`~compiler.artifact.ArtifactMeta`.
    """

    def __init__(self, path: Path, meta: ArtifactMeta, vm: Any, device: Any) -> None:
        self.path = path
        self.meta = meta
        self._vm = vm
        self._device = device
        self._inputs: dict[str, np.ndarray] = {}
        self._schedule: GraphSchedule | None = None

    # ---- loading ---------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Executor:
        """Load an artifact written by ``Model.compile``.

        The library is copied to a temporary directory, loaded, and the copy
        removed (the loaded code stays mapped).

        Only a library whose size and SHA-256 match ``meta.json`` is loaded (see
        :func:`compiler.artifact.extract_library`). That detects a damaged or
        mixed-up file; it does not make a hostile artifact safe: loading runs
        the library's code, so load only artifacts you trust.

        Raises:
            CompileError: Not an artifact, a newer format, a library that does not
                match its checksum, or one that does not load (for example built
                by another TVM version).
        """
        p = Path(path)
        meta = read_meta(p)
        if not meta.lib_sha256:
            raise CompileError(
                f"{p} is artifact format {meta.format_version}, which records no checksum of "
                "its library, so the library is not loaded: recompile it with this graphtune"
            )
        import tvm
        from tvm import relax

        from compiler.artifact import extract_library

        if meta.tvm_version and meta.tvm_version != tvm.__version__:
            log.warning(
                "%s was built with TVM %s, this is TVM %s; loading may fail",
                p, meta.tvm_version, tvm.__version__,
            )
        with tempfile.TemporaryDirectory(prefix="stcobj-") as tmp:
            lib_path = extract_library(p, tmp, meta)  # refuses a library that does not match
            try:
                with native_output_to_log(log):
                    lib = tvm.runtime.load_module(str(lib_path))
                    device = tvm.cpu()
                    vm = relax.VirtualMachine(lib, device)
            except Exception as exc:
                raise CompileError(f"{p}: cannot load the compiled library ({_first(exc)})") \
                    from None
        return cls(p, meta, vm, device)

    load_from_stcobj = load  # the guide's name: tb.kernel.Executor.load_from_stcobj

    # ---- introspection ---------------------------------------------------------------
    @property
    def schedule(self) -> GraphSchedule:
        """The graph schedule the artifact was built with."""
        if self._schedule is None:
            self._schedule = GraphSchedule.loads(read_text(self.path, SCHEDULE))
        return self._schedule

    @property
    def ir(self) -> str:
        """The scheduled Relax module as TVMScript text."""
        from compiler.artifact import IR

        return read_text(self.path, IR)

    @property
    def input_info(self) -> dict[str, dict[str, Any]]:
        """``{name: {"shape": [...], "dtype": str}}`` of the inputs, in call order."""
        return {t.name: {"shape": list(t.shape), "dtype": t.dtype} for t in self.meta.inputs}

    @property
    def output_info(self) -> dict[str, dict[str, Any]]:
        """``{name: {"shape": [...], "dtype": str}}`` of the outputs, in order."""
        return {t.name: {"shape": list(t.shape), "dtype": t.dtype} for t in self.meta.outputs}

    # ---- running ---------------------------------------------------------------------
    def set_input(self, inputs: Mapping[str, Any]) -> None:
        """Set some or all inputs by name (values are kept until replaced).

        Values are converted to the model's dtype when the conversion keeps
        their kind (float16 data for a float32 model, int32 ids for int64);
        float data for an integer input is refused, and so are indices outside
        the table they index (``TensorInfo.int_low``/``int_high``).

        Raises:
            CompileError: Unknown name, wrong shape, a non-convertible dtype, or
                an index out of range.
        """
        by_name = {t.name: t for t in self.meta.inputs}
        staged: dict[str, np.ndarray] = {}
        for name, value in inputs.items():
            info = by_name.get(name)
            if info is None:
                raise CompileError(
                    f"model has no input {name!r} (inputs: {', '.join(by_name)})"
                )
            staged[name] = check_input(info, value)
        self._inputs.update(staged)

    def run(self, inputs: Mapping[str, Any] | None = None) -> list[np.ndarray]:
        """Run once (after :meth:`set_input`, or with ``inputs``); outputs in order.

        Raises:
            CompileError: An input was never set.
        """
        if inputs:
            self.set_input(inputs)
        missing = [t.name for t in self.meta.inputs if t.name not in self._inputs]
        if missing:
            raise CompileError(
                f"input {missing[0]!r} was not set: call set_input({{{missing[0]!r}: array}})"
            )
        import tvm

        args = [tvm.runtime.tensor(self._inputs[t.name], self._device) for t in self.meta.inputs]
        try:
            result = self._vm["main"](*args)
        except Exception as exc:  # noqa: BLE001 - the VM raises TVM's own error kinds
            raise CompileError(f"{self.path}: the model failed to run ({_first(exc)})") from None
        return _tensor_to_numpy(result)

    def __call__(self) -> list[np.ndarray]:
        """Run with the inputs set so far (the guide's ``graph_exec()``)."""
        return self.run()

    def __repr__(self) -> str:
        ins = ", ".join(f"{t.name}{list(t.shape)}" for t in self.meta.inputs)
        return f"Executor({self.meta.model}, {ins}, schedule={self.meta.schedule_source!r})"


def check_input(info: TensorInfo, value: Any) -> np.ndarray:
    """``value`` as a contiguous array of the input's dtype, after checking its shape.

    Raises:
        CompileError: Wrong shape, or a dtype that cannot be converted (see
            :meth:`Executor.set_input`).
    """
    try:
        arr = np.asarray(value)
    except Exception as exc:
        raise CompileError(f"input {info.name!r} is not an array ({_first(exc)})") from None
    if tuple(arr.shape) != info.shape:
        raise CompileError(
            f"input {info.name!r} has shape {list(arr.shape)}, the model expects "
            f"{list(info.shape)}"
        )
    want = np.dtype(info.dtype)
    if arr.dtype != want:
        if arr.dtype.kind not in "biuf" or not np.can_cast(arr.dtype, want, casting="same_kind"):
            raise CompileError(
                f"input {info.name!r} has dtype {arr.dtype}, the model expects {want} "
                "(convert it yourself if that is intended)"
            )
    if info.int_high is not None and arr.size:
        _check_index_range(info, arr)  # before the cast: int64 -> int32 would wrap around
    if arr.dtype != want:
        arr = arr.astype(want)
    return np.ascontiguousarray(arr)


def _check_index_range(info: TensorInfo, arr: np.ndarray) -> None:
    """Refuse indices outside ``[int_low, int_high)``: the CPU build would read out of bounds."""
    assert info.int_high is not None
    low = 0 if info.int_low is None else info.int_low
    lo, hi = int(arr.min()), int(arr.max())
    if lo >= low and hi < info.int_high:
        return
    bad = lo if lo < low else hi
    where = np.argwhere((arr < low) | (arr >= info.int_high))[0]
    raise CompileError(
        f"input {info.name!r} holds index {bad} at {list(map(int, where))}, outside the "
        f"table it indexes (valid: {low} <= index < {info.int_high})"
    )


def _first(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(exc).__name__

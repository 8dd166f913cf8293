"""Inputs and onnxruntime's outputs for a zoo model, as ``.npz`` files for ``graphtune run``.

``make demo`` runs this, then ``graphtune run ... --inputs IN.npz --expect REF.npz``:
the compiled artifact must reproduce onnxruntime on the same data. The data are the
zoo's in-range random inputs (:func:`compiler.zoo.random_inputs`); the weights of a
``--weights inputs`` model are regenerated (:func:`compiler.zoo.materialize_weights`)
and fed to onnxruntime beside them. Needs onnxruntime (the ``dev`` extra).

Usage: python tools/ort_reference.py MODEL.onnx --inputs IN.npz --ref REF.npz [--seed 0]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import onnx


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--inputs", required=True, help=".npz of the data inputs to write")
    ap.add_argument("--ref", required=True, help=".npz of onnxruntime's outputs to write")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    import onnxruntime as ort

    from compiler import zoo

    proto = onnx.load(args.model)
    inputs = zoo.random_inputs(proto, seed=args.seed)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    outputs = sess.run(None, {**inputs, **zoo.materialize_weights(proto)})
    names = [o.name for o in sess.get_outputs()]
    np.savez(args.inputs, **inputs)  # type: ignore[arg-type]
    np.savez(args.ref, **dict(zip(names, outputs)))  # type: ignore[arg-type]
    print(f"wrote {args.inputs} ({', '.join(inputs)}) and {args.ref} (onnxruntime "
          f"{ort.__version__}: {', '.join(names)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

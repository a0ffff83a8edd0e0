"""The local stack's embedding server: all-MiniLM-L6-v2 on onnxruntime, no PyTorch.

Run by the ``embeddings-onnx`` venv's own Python, so it imports nothing from the project. It
speaks the part of the OpenAI embeddings API that OpenViking and the engine use:
``GET {prefix}/models`` and ``POST {prefix}/embeddings`` (``input`` a string or a list,
``encoding_format`` ``float`` or ``base64`` as the OpenAI client sends by default, ``dimensions``
only 384). Vectors are sentence-transformers' recipe: the mean of the token states,
L2-normalised, inputs cut at 256 tokens.

Each text is one model run on one thread, and as many runs go at once as there are cores (a
request's texts among them). Measured on turn-sized texts, 2 cores: one thread a run gives 207
texts/s at 3.6 ms of CPU a text, where onnxruntime's default (every core a run, threads spinning
for work) gives 76/s at 9.9 ms. One text a run also keeps a text's vector independent of its
request: the int8 products quantize activations per run, and beside other texts (and their
padding) a vector moved by up to 0.027 of cosine.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
from tokenizers import Tokenizer

DIMENSION = 384
MAX_INPUTS = 2048
Vectors = np.ndarray[Any, np.dtype[np.float32]]


class RequestError(ValueError):
    """A request the API refuses, with the field it names."""


class Embedder:
    def __init__(self, model_dir: Path) -> None:
        config = json.loads((model_dir / "sentence_bert_config.json").read_text(encoding="utf-8"))
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(int(config["max_seq_length"]))
        self.tokenizer.no_padding()  # the file pads every input to 128
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(
            str(model_dir / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self.runs = ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="model-run")

    def embed(self, texts: list[str]) -> tuple[Vectors, int]:
        """Unit vectors in input order, and the number of tokens read."""
        encoded = [np.array([e.ids], dtype=np.int64) for e in self.tokenizer.encode_batch(texts)]
        vectors = np.stack(list(self.runs.map(self._vector, encoded)))
        return vectors, sum(ids.shape[1] for ids in encoded)

    def _vector(self, ids: np.ndarray[Any, np.dtype[np.int64]]) -> Vectors:
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        pooled = self.session.run(None, feeds)[0][0].mean(axis=0)
        unit: Vectors = (pooled / max(float(np.linalg.norm(pooled)), 1e-12)).astype(np.float32)
        return unit


def parse_request(body: bytes) -> tuple[list[str], str]:
    """The inputs and the encoding format of an embeddings request."""
    try:
        request = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RequestError(f"body: not JSON ({error})") from error
    if not isinstance(request, dict):
        raise RequestError("body: must be a JSON object")
    inputs = request.get("input")
    texts = [inputs] if isinstance(inputs, str) else inputs
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise RequestError("input: must be a string or a non-empty list of strings")
    if len(texts) > MAX_INPUTS:
        raise RequestError(f"input: at most {MAX_INPUTS} strings per request")
    encoding = request.get("encoding_format") or "float"
    if encoding not in ("float", "base64"):
        raise RequestError("encoding_format: must be 'float' or 'base64'")
    if request.get("dimensions") not in (None, DIMENSION):
        raise RequestError(f"dimensions: this model gives {DIMENSION}")
    return texts, encoding


def render(vectors: Vectors, tokens: int, encoding: str, model: str) -> dict[str, Any]:
    data = [
        {
            "object": "embedding",
            "index": i,
            "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode("ascii")
            if encoding == "base64"
            else v.tolist(),
        }
        for i, v in enumerate(vectors)
    ]
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return {"object": "list", "data": data, "model": model, "usage": usage}


def handler_class(embedder: Embedder, model: str, prefix: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms ACK wait

        def _send(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
            body = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _error(self, status: HTTPStatus, message: str) -> None:
            self._send(status, {"error": {"message": message, "type": "invalid_request_error"}})

        def do_GET(self) -> None:
            if self.path.rstrip("/") != f"{prefix}/models":
                self._error(HTTPStatus.NOT_FOUND, f"no route {self.path}")
                return
            entry = {"id": model, "object": "model", "owned_by": "context-engine", "created": 0}
            self._send(HTTPStatus.OK, {"object": "list", "data": [entry]})

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))  # even if refused:
            if self.path.rstrip("/") != f"{prefix}/embeddings":  # the connection is kept alive
                self._error(HTTPStatus.NOT_FOUND, f"no route {self.path}")
                return
            try:
                texts, encoding = parse_request(body)
            except RequestError as error:
                self._error(HTTPStatus.BAD_REQUEST, str(error))
                return
            vectors, tokens = embedder.embed(texts)
            self._send(HTTPStatus.OK, render(vectors, tokens, encoding, model))

        def log_message(self, format: str, *args: Any) -> None:
            sys.stderr.write(f"{time.strftime('%H:%M:%S')} {self.address_string()} {format % args}\n")

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--served-model-name", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--url-prefix", default="/v1")
    args = parser.parse_args(argv)
    embedder = Embedder(args.model_dir)
    server = ThreadingHTTPServer(
        (args.host, args.port), handler_class(embedder, args.served_model_name, args.url_prefix)
    )
    server.daemon_threads = True
    print(f"serving {args.served_model_name} on http://{args.host}:{args.port}{args.url_prefix}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])

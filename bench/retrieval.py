"""Retrieval at scale, on the pinned benchmark databases (bench/data.py):

- candidate stage at 100,000 notes / 100 task types, for a task type holding 1% of the notes: how many of
  candidate_k = 20 come back and their recall against exact search, for plain HNSW (ef_search 40, no iterative
  scan), pgvector's iterative scan (what fb_retrieve uses above pg_feedback.exact_scan_limit) and the exact path;
- fb_retrieve latency p50/p95 at 10k and 100k notes, filtered to one type: the defaults (selective cross-encoder
  reranking) and rerank => false, with the models in the backend and in the shared inference worker;
- the cross-encoder's cost per candidate;
- code inputs (the held-out authors' golden code inputs, data/golden_code E and F): default fb_retrieve latency at
  10k and 100k notes (segmentation and the learned decision included) and what one more segment costs.
"""

import csv
import json
import random
import statistics
import time

import data
from common import ROOT, connect, percentile


def questions(n, seed=11):
    """n golden questions that paraphrase a note (kind answer), each aimed at one team's task type of its base
    type."""
    with open(ROOT / "data" / "golden_questions.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["kind"] == "answer"]
    rng = random.Random(seed)
    types, _ = data.task_types()
    picked = rng.sample(rows, n)
    return [(r["question"], rng.choice([t for t in types if data.base_of(t) == r["task_type"]])) for r in picked]


def code_inputs(n, seed=13):
    """n held-out code inputs (authors E and F), each aimed at one team's task type of its base type, with how many
    texts fb_retrieve embeds for it (the input and its segments)."""
    rows = []
    for author in ("E", "F"):
        with open(ROOT / "data" / "golden_code" / f"{author}.jsonl") as f:
            rows += [json.loads(line) for line in f if line.strip()]
    rng = random.Random(seed)
    types, _ = data.task_types()
    picked = rng.sample(rows, min(n, len(rows)))
    return [((r["question"] + "\n" if r["question"] else "") + r["input"],
             rng.choice([t for t in types if data.base_of(t) == r["task_type"]])) for r in picked]


def code_latency(port, db, qs, mode=None):
    """Default fb_retrieve on code inputs: p50, p95, rows per input, mean lines and texts embedded per input. One
    client: in worker mode its embeddings run with pg_feedback.worker_idle_threads (the other runner is idle)."""
    with connect(port, db, mode=mode) as c:
        c.execute("SELECT fb_embed_query('warm-up')")
        lat, rows, texts = [], 0, []
        for q, t in qs:
            texts.append(1 + c.execute("SELECT cardinality(_fb_segments(%s, _fb_decision(_fb_active_model())))",
                                       (q,)).fetchone()[0])
            t0 = time.perf_counter()
            rows += len(c.execute("SELECT id FROM fb_retrieve(%s, %s)", (q, t)).fetchall())
            lat.append((time.perf_counter() - t0) * 1000)
    lines = statistics.mean(q.count("\n") + 1 for q, _ in qs)
    return statistics.median(lat), percentile(lat, 95), rows / len(qs), lines, statistics.mean(texts)


def segment_cost(port, qs):
    """Milliseconds one more embedded text costs: fb_embed_batch of an input with the segments of a decision fitted
    with fb_calibrate(code_segments => 8) against the input alone (distinct texts, so no cache hit), per extra
    text."""
    with connect(port, "feedback_bench_10k") as c:
        per = []
        for i, (q, _) in enumerate(qs):
            segs = c.execute("""SELECT _fb_segments(%s, '{"max_segments": 8}')""", (q,)).fetchone()[0]
            if not segs:
                continue
            t0 = time.perf_counter()
            c.execute("SELECT fb_embed_batch(%s::text[], true)", ([f"{i} alone {q}"],)).fetchone()
            one_text = time.perf_counter() - t0
            t0 = time.perf_counter()
            c.execute("SELECT fb_embed_batch(%s::text[], true)", ([f"{i} whole {q}"] + [f"{i} {s}" for s in segs],)).fetchone()
            per.append((time.perf_counter() - t0 - one_text) / len(segs))
    return statistics.median(per) * 1000


def candidate_recall(port, qs, k=20):
    """Per method: mean candidates returned and mean recall@k against exact search."""
    db = "feedback_bench_100k"
    with connect(port, db) as c:
        share = c.execute("SELECT round(100.0 * count(*) / (SELECT count(*) FROM feedback_notes), 2) "
                          "FROM feedback_notes WHERE task_type = %s", (qs[0][1],)).fetchone()[0]
        out = {"plain HNSW (ef_search 40, no iterative scan)": [], "HNSW + iterative scan (relaxed_order)": [],
               "exact": []}
        times = {m: [] for m in out}
        for q, t in qs:
            vec = c.execute("SELECT fb_embed_query(%s)::text", (q,)).fetchone()[0]
            t0 = time.perf_counter()
            exact = [r[0] for r in c.execute("SELECT id FROM _fb_candidates(%s::vector, %s, %s, 'exact')", (vec, t, k))]
            times["exact"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            iterative = [r[0] for r in c.execute("SELECT id FROM _fb_candidates(%s::vector, %s, %s, 'ann')", (vec, t, k))]
            times["HNSW + iterative scan (relaxed_order)"].append(time.perf_counter() - t0)
            c.execute("SET hnsw.iterative_scan = off")
            c.execute("SET hnsw.ef_search = 40")
            t0 = time.perf_counter()
            plain = [r[0] for r in c.execute(
                "SELECT id FROM feedback_notes WHERE (task_type = %s) IS TRUE AND status = 'active' "
                "ORDER BY embedding <=> %s::vector LIMIT %s", (t, vec, k))]  # IS TRUE: on the HNSW index
            times["plain HNSW (ef_search 40, no iterative scan)"].append(time.perf_counter() - t0)
            c.execute("RESET hnsw.iterative_scan")
            c.execute("RESET hnsw.ef_search")
            for name, got in (("plain HNSW (ef_search 40, no iterative scan)", plain),
                              ("HNSW + iterative scan (relaxed_order)", iterative), ("exact", exact)):
                out[name].append((len(got), len(set(got) & set(exact)) / len(exact)))
    return share, {m: (statistics.mean(x[0] for x in v), statistics.mean(x[1] for x in v),
                       statistics.median(times[m]) * 1000) for m, v in out.items()}


def retrieve_latency(port, db, qs, rerank, mode=None):
    """fb_retrieve over qs on one warm connection (rerank None: the defaults): p50 ms, p95 ms, rows per query."""
    with connect(port, db, mode=mode) as c:
        c.execute("SELECT fb_embed_query('warm-up'), fb_rerank('warm', ARRAY['up'])")
        lat, rows = [], 0
        for q, t in qs:
            t0 = time.perf_counter()
            rows += len(c.execute("SELECT id FROM fb_retrieve(%s, %s, rerank => %s)", (q, t, rerank)).fetchall())
            lat.append((time.perf_counter() - t0) * 1000)
    return statistics.median(lat), percentile(lat, 95), rows / len(qs)


def rerank_cost(port, qs):
    """Seconds per candidate: a 20-passage fb_rerank call (lesson + correction, as fb_retrieve sends) / 20."""
    with connect(port, "feedback_bench_10k") as c:
        c.execute("SELECT fb_rerank('warm', ARRAY['up'])")
        per20, per1 = [], []
        for q, t in qs:
            passages = [r[0] for r in c.execute(
                "SELECT lesson || ' ' || correction FROM feedback_notes WHERE task_type = %s LIMIT 20", (t,))]
            t0 = time.perf_counter()
            c.execute("SELECT fb_rerank(%s, %s)", (q, passages)).fetchone()
            per20.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            c.execute("SELECT fb_rerank(%s, %s)", (q, passages[:1])).fetchone()
            per1.append(time.perf_counter() - t0)
    return statistics.median(per20) * 1000, statistics.median(per1) * 1000


def run(port, n_queries=40, log=print):
    rows = []
    qs = questions(n_queries)
    share, recall = candidate_recall(port, qs)
    for method, (returned, rec, ms) in recall.items():
        rows.append((f"candidates at 100k notes, 1 task type = {share}% of notes: {method}",
                     f"{returned:.1f} of 20 returned, recall@20 vs exact {rec:.3f}, p50 {ms:.1f} ms"))
    for db, label in (("feedback_bench_10k", "10k"), ("feedback_bench_100k", "100k")):
        for mode in ("backend", "worker"):
            for rerank in (None, False):
                p50, p95, avg_rows = retrieve_latency(port, db, qs, rerank, mode)
                how = "defaults (selective cross-encoder reranking)" if rerank is None else "rerank => false (cosine)"
                rows.append((f"fb_retrieve at {label} notes, {how}, {mode} mode",
                             f"p50 {p50:.0f} ms, p95 {p95:.0f} ms ({avg_rows:.1f} rows/query)"))
    cqs = code_inputs(n_queries)
    for db, label in (("feedback_bench_10k", "10k"), ("feedback_bench_100k", "100k")):
        for mode in (None, "worker"):
            p50, p95, avg_rows, lines, texts = code_latency(port, db, cqs, mode)
            how = "" if mode is None else ", worker mode (one client: embeddings on both cores)"
            rows.append((f"fb_retrieve at {label} notes, code inputs (held-out authors, {lines:.0f} lines and "
                         f"{texts:.1f} texts embedded on average), defaults{how}",
                         f"p50 {p50:.0f} ms, p95 {p95:.0f} ms ({avg_rows:.1f} rows/input)"))
    rows.append(("code inputs: one more segment embedded (a decision fitted with code_segments => 8)",
                 f"{segment_cost(port, cqs):.1f} ms"))
    ms20, ms1 = rerank_cost(port, qs)
    rows.append(("cross-encoder cost: 20 candidates in one run", f"p50 {ms20:.0f} ms = {ms20 / 20:.1f} ms per candidate "
                                                                 f"(1 candidate alone: {ms1:.1f} ms)"))
    return rows

"""Selective reranking and hybrid candidates: the speed/quality curve.

- quality: the test split of the project's golden set (demo database "feedback", sample notes), through fb_eval,
  with the shipped defaults (the calibrated pg_feedback.* settings; feedback_retrieval_settings rows, if any, are
  set aside in a transaction that is rolled back) and the score cache off, so every pair counted was scored;
- speed: fb_retrieve p50/p95 at 100,000 notes (feedback_bench_100k, 1% of the notes per task type), the same
  questions as the retrieval section, one new connection per configuration;
- identifiers: recall@3 on the golden questions whose clue is an exact identifier, hybrid on and off.
"""

import csv
import statistics
import time

import retrieval
from common import ROOT, connect, percentile

CALIBRATED = {}
LEGACY = {"pg_feedback.rerank_floor": "-9.4", "pg_feedback.relative_cut": "-1", "pg_feedback.max_notes": "3",
          "pg_feedback.selective_rerank": "off", "pg_feedback.hybrid": "off", "pg_feedback.rerank_tie_margin": "0",
          "pg_feedback.rerank_max_tokens": "0"}
CONFIGS = [
    ("0.3.0's cut (floor -9.4, up to 3 notes, every dense candidate reranked whole)", LEGACY),
    ("every candidate reranked (selective off)", {"pg_feedback.selective_rerank": "off"}),
    ("selective, at most 1 pair", {"pg_feedback.rerank_max_pairs": "1"}),
    ("selective, at most 2 pairs", {"pg_feedback.rerank_max_pairs": "2"}),
    ("selective, calibrated bounds (default)", CALIBRATED),
    ("selective, at most 6 pairs", {"pg_feedback.rerank_max_pairs": "6"}),
    ("selective, at most 10 pairs", {"pg_feedback.rerank_max_pairs": "10"}),
    ("selective, pairs cut to 64 tokens", {"pg_feedback.rerank_max_tokens": "64"}),
    ("selective, hybrid off (dense candidates only)", {"pg_feedback.hybrid": "off"}),
    ("every candidate reranked, hybrid off", {"pg_feedback.selective_rerank": "off", "pg_feedback.hybrid": "off"}),
    ("no reranking (cosine, calibrated cut)", {"pg_feedback.rerank": "off"}),
]


def apply(c, settings):
    c.execute("SET pg_feedback.rerank_cache_size = 0")
    for name, value in settings.items():
        c.execute(f"SET {name} = '{value}'")


def quality(port, settings):
    """fb_eval on the test split's questions (prose: the path these settings steer): recall@3, precision, no-answer
    share, mean notes, and pairs scored per question."""
    with connect(port, "feedback", autocommit=False) as c:
        c.execute("DELETE FROM feedback_retrieval_settings")
        apply(c, settings)
        before = c.execute("SELECT pairs_scored FROM fb_model_stats()").fetchone()[0]
        row = c.execute("SELECT recall_at_k, \"precision\", no_answer_correct, mean_injected, misled_share, questions "
                        "FROM fb_eval(3, record => false, split => 'test') "
                        "WHERE task_type = '(all)' AND kind = 'prose'").fetchone()   # code inputs never rerank
        pairs = c.execute("SELECT pairs_scored FROM fb_model_stats()").fetchone()[0] - before
        c.rollback()
    return (*row[:5], pairs / row[5])


def timed(c, qs):
    """p50 and p95 (ms) of fb_retrieve over qs on connection c."""
    lat = []
    for q, t in qs:
        t0 = time.perf_counter()
        c.execute("SELECT id FROM fb_retrieve(%s, %s)", (q, t)).fetchall()
        lat.append((time.perf_counter() - t0) * 1000)
    return statistics.median(lat), percentile(lat, 95)


def speed(port, settings, qs):
    with connect(port, "feedback_bench_100k") as c:
        apply(c, settings)
        c.execute("SELECT fb_embed_query('warm-up'), fb_rerank('warm', ARRAY['up'])")
        return timed(c, qs)


def recurring(port, qs):
    """The same questions asked twice in one session: the second time the query and score caches answer."""
    with connect(port, "feedback_bench_100k") as c:
        timed(c, qs)
        return timed(c, qs)


def identifiers(port, hybrid):
    """recall@3 over the golden questions of kind identifier (both splits), with the shipped defaults."""
    with open(ROOT / "data" / "golden_questions.csv", newline="") as f:
        wanted = {r["question"] for r in csv.DictReader(f) if r["kind"] == "identifier"}
    with connect(port, "feedback", autocommit=False) as c:
        c.execute("DELETE FROM feedback_retrieval_settings")
        apply(c, {"pg_feedback.hybrid": hybrid})
        golden = c.execute("SELECT g.id, g.query, g.task_type, gr.note_ids, gr.grades FROM feedback_golden g "
                           "JOIN _fb_golden_grades() gr ON gr.golden_id = g.id").fetchall()
        hits = n = 0
        for _, q, t, ids, grades in golden:
            if q not in wanted:
                continue
            top = max(grades)
            got = [r[0] for r in c.execute("SELECT id FROM fb_retrieve(%s, %s)", (q, t))]
            n += 1
            hits += any(g == top and i in got for i, g in zip(ids, grades))
        c.rollback()
    return hits, n


def run(port, n_queries=40, log=print):
    rows = []
    qs = retrieval.questions(n_queries)
    for name, settings in CONFIGS:
        log(f"   {name}")
        recall, precision, no_answer, mean_notes, misled, pairs = quality(port, settings)
        p50, p95 = speed(port, settings, qs)
        rows.append((f"selective reranking: {name}",
                     f"test split: recall@3 {recall:.3f}, precision {precision:.3f}, no-answer {no_answer:.3f}, "
                     f"misled {misled:.3f}, {mean_notes:.2f} notes, {pairs:.1f} pairs/question; "
                     f"100k notes: p50 {p50:.0f} ms, p95 {p95:.0f} ms"))
    p50, p95 = recurring(port, qs)
    rows.append(("selective reranking: recurring questions (query and score caches)", f"p50 {p50:.0f} ms, p95 {p95:.0f} ms"))
    for hybrid in ("on", "off"):
        hits, n = identifiers(port, hybrid)
        rows.append((f"hybrid {hybrid}: questions hinging on an exact identifier (both splits)",
                     f"recall@3 {hits}/{n} = {hits / n:.3f}"))
    return rows

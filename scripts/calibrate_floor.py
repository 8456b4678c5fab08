"""Calibrates fb_retrieve's relevance floors on the golden questions (data/golden_questions.csv) against the
sample notes in the demo database (make demo), and writes results/floor_calibration.md.

For each question it takes the 20 nearest candidates (the same _fb_candidates fb_retrieve uses), scores them
by cosine similarity and by the cross-encoder (passage = lesson, and passage = lesson + correction), and for
each scorer sweeps the floor. A question is answered well when
  - it expects a note: that note is in the top 3 of those at or above the floor (recall@3), or
  - it expects none: nothing is at or above the floor.
The floor chosen for a scorer maximises the mean of recall@3 (answerable) and the share of no-answer questions
that get zero rows (balanced accuracy), so neither kind of question dominates.

Usage: .venv/bin/python scripts/calibrate_floor.py [--port 5433]
"""

import argparse
import csv
import math
import os
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
K = 3


def load_golden(conn):
    ids = {lesson: i for i, lesson in conn.execute("SELECT id, lesson FROM feedback_notes WHERE status = 'active'")}
    golden = []
    with open(ROOT / "data" / "golden_questions.csv", newline="") as f:
        for row in csv.DictReader(f):
            expected = row["expected_lesson"]
            if expected and expected not in ids:
                raise SystemExit(f"golden lesson not in the database (run make demo): {expected}")
            golden.append((row["question"], row["task_type"], ids.get(expected) if expected else None))
    return golden


def score_all(conn, golden):
    rows = []
    for q, t, expected in golden:
        cands = conn.execute(
            "SELECT f.id, f.lesson, f.correction, (1 - c.distance)::real, f.created_at "
            "FROM _fb_candidates(fb_embed_query(%s), %s, 20) c JOIN feedback_notes f USING (id) ORDER BY c.distance",
            (q, t)).fetchall()
        lessons = [c[1] for c in cands]
        both = [f"{c[1]} {c[2]}" for c in cands]
        s_lesson = conn.execute("SELECT fb_rerank(%s, %s)", (q, lessons)).fetchone()[0]
        s_both = conn.execute("SELECT fb_rerank(%s, %s)", (q, both)).fetchone()[0]
        rows.append(dict(expected=expected, ids=[c[0] for c in cands],
                         scores={"cosine": [c[3] for c in cands], "ce_lesson": s_lesson, "ce_lesson_correction": s_both}))
    return rows


def evaluate(rows, scorer, floor):
    hits = rr = answerable = empty_ok = empties = 0
    for r in rows:
        ranked = sorted(zip(r["scores"][scorer], r["ids"]), key=lambda x: -x[0])
        kept = [i for s, i in ranked if s >= floor]
        if r["expected"] is None:
            empties += 1
            empty_ok += not kept
        else:
            answerable += 1
            top = kept[:K]
            hits += r["expected"] in top
            rr += 1 / (kept.index(r["expected"]) + 1) if r["expected"] in kept else 0
    recall = hits / answerable
    empty_rate = empty_ok / empties
    return dict(floor=floor, recall=recall, mrr=rr / answerable, empty_ok=empty_ok, empties=empties,
                empty_rate=empty_rate, balanced=(recall + empty_rate) / 2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=int(os.environ.get("FB_PORT", 5433)))
    args = ap.parse_args()
    with psycopg.connect(host="127.0.0.1", port=args.port, user="postgres", dbname="feedback", autocommit=True) as c:
        golden = load_golden(c)
        rows = score_all(c, golden)
        configured = {"cosine": float(c.execute("SHOW pg_feedback.cosine_floor").fetchone()[0]),
                      "ce_lesson_correction": float(c.execute("SHOW pg_feedback.rerank_floor").fetchone()[0])}

    out = ["# Floor calibration", "",
           f"{len(rows)} golden questions ({sum(r['expected'] is not None for r in rows)} expect a note, "
           f"{sum(r['expected'] is None for r in rows)} expect none), 20 candidates each, k = {K}.", "",
           "| scorer | recall@3 without floor | MRR without floor | best floor | recall@3 | MRR | zero rows on no-answer | balanced |",
           "|---|---|---|---|---|---|---|---|"]
    best = {}
    for scorer in ("cosine", "ce_lesson", "ce_lesson_correction"):
        values = sorted({s for r in rows for s in r["scores"][scorer]})
        grid = sorted(set([round(v, 3) for v in values[:: max(1, len(values) // 400)]]))
        results = [evaluate(rows, scorer, f) for f in grid]
        top = max(results, key=lambda x: (x["balanced"], x["recall"]))
        none = evaluate(rows, scorer, -math.inf)
        best[scorer] = top
        out.append(f"| {scorer} | {none['recall']:.3f} | {none['mrr']:.3f} | {top['floor']:.3f} | {top['recall']:.3f} | "
                   f"{top['mrr']:.3f} | {top['empty_ok']}/{top['empties']} | {top['balanced']:.3f} |")
    out += ["", "At the configured defaults (what fb_retrieve uses: cross-encoder on lesson + correction, or cosine):", "",
            "| scorer | floor | recall@3 | MRR | zero rows on no-answer |", "|---|---|---|---|---|"]
    for scorer, floor in configured.items():
        r = evaluate(rows, scorer, floor)
        out.append(f"| {scorer} | {floor} | {r['recall']:.3f} | {r['mrr']:.3f} | {r['empty_ok']}/{r['empties']} |")
    text = "\n".join(out) + "\n"
    (ROOT / "results").mkdir(exist_ok=True)
    (ROOT / "results" / "floor_calibration.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

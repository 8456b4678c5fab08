"""The cost of the near-duplicate comparison at ingest (issue 20): fb_ingest of one note into the 100k store
(1,000 notes per task_type), each call in its own transaction rolled back, so the store never changes, in three
settings: the default (neighbours compared by text), the neighbour search alone (pg_feedback.compare_threshold =
1: what the cosine merge of earlier versions cost when nothing merged) and merging off
(pg_feedback.dup_threshold = 1). Two kinds of note: a variant of a stored lesson (its nearest neighbours are
above the comparison bound, so up to three are compared) and a lesson of another kind (none near enough). What
the comparison adds is the default minus the search alone.
"""

import random
import statistics

from common import connect, percentile
from data import generate

DB = "feedback_bench_100k"
NOVEL = ["Feature flags read at import time never change; read them per request.",
         "A Dockerfile that copies the whole repo before installing packages busts the cache.",
         "Retrying a non-idempotent POST can charge the customer twice; send an idempotency key.",
         "Timestamps without a zone are ambiguous across regions; store them in UTC.",
         "Logging the full request body leaks passwords and tokens into the log store."]


def notes(n, present, seed=5):
    """n variants of stored lessons and n lessons of another kind, all into task_types the store holds."""
    rng = random.Random(seed)
    stored = [r for r in generate(2) if r[0] in present]
    types = sorted(present)
    near = []
    for i in range(n):
        t, wrong, correction, lesson = rng.choice(stored)
        near.append((t, wrong, correction, lesson.replace("(case", f"(bench {i}, case")))
    novel = [(rng.choice(types), "", lesson, f"{lesson} (bench {i})") for i, lesson in
             ((i, NOVEL[i % len(NOVEL)]) for i in range(n))]
    return near, novel


SETTINGS = {"compare": [], "search": ["SET LOCAL pg_feedback.compare_threshold = 1"],
            "off": ["SET LOCAL pg_feedback.dup_threshold = 1"]}


def ingest_ms(port, rows, setting):
    out = []
    with connect(port, DB, autocommit=False) as c:
        c.execute("SET pg_feedback.inference = backend")
        c.execute("SELECT fb_embed('warm the model')")
        c.rollback()
        for t, wrong, correction, lesson in rows:
            for sql in SETTINGS[setting]:
                c.execute(sql)
            start = c.execute("SELECT clock_timestamp()").fetchone()[0]
            c.execute("SELECT * FROM fb_ingest(%s, %s, %s, %s, 'bench')", (t, wrong, correction, lesson))
            end = c.execute("SELECT clock_timestamp()").fetchone()[0]
            c.rollback()
            out.append((end - start).total_seconds() * 1000)
    return out


def run(port, n=60):
    with connect(port, DB) as c:
        size = c.execute("SELECT count(*) FROM feedback_notes").fetchone()[0]
        present = {t for (t,) in c.execute("SELECT DISTINCT task_type FROM feedback_notes")}
    near, novel = notes(n, present)
    rows = []
    for label, sample in (("a variant of a stored lesson (neighbours compared)", near),
                          ("a lesson of another kind (no neighbour near enough)", novel)):
        ms = {s: ingest_ms(port, sample, s) for s in SETTINGS}
        p50 = {s: statistics.median(v) for s, v in ms.items()}
        rows.append((f"fb_ingest into {size:,} notes, {label}: compared / search only / merging off ({n} notes)",
                     f"p50 {p50['compare']:.1f} / {p50['search']:.1f} / {p50['off']:.1f} ms, p95 "
                     f"{percentile(ms['compare'], 95):.1f} / {percentile(ms['search'], 95):.1f} / "
                     f"{percentile(ms['off'], 95):.1f} ms: the comparison adds {p50['compare'] - p50['search']:.1f} ms"))
    return rows

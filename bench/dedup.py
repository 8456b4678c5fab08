"""The cost of the near-duplicate comparison at ingest (issue 20): fb_ingest of one note into the 100k store,
with the comparison (the default) and with merging off (pg_feedback.dup_threshold = 1), each call in its own
transaction rolled back, so the store never changes. Two kinds of note: a variant of a stored lesson (its nearest
neighbours are above the comparison bound, so up to three are compared) and a lesson of another kind (no
neighbour near enough: only the neighbour search runs). The difference per note is what the comparison adds.
"""

import random
import statistics

from common import connect, percentile
from data import generate, task_types

DB = "feedback_bench_100k"
NOVEL = ["Feature flags read at import time never change; read them per request.",
         "A Dockerfile that copies the whole repo before installing packages busts the cache.",
         "Retrying a non-idempotent POST can charge the customer twice; send an idempotency key.",
         "Timestamps without a zone are ambiguous across regions; store them in UTC.",
         "Logging the full request body leaks passwords and tokens into the log store."]


def notes(n, seed=5):
    rng = random.Random(seed)
    stored = generate(2)
    types, _ = task_types()
    near = []
    for i in range(n):
        t, wrong, correction, lesson = rng.choice(stored)
        near.append((t, wrong, correction, lesson.replace("(case", f"(bench {i}, case")))
    novel = [(rng.choice(types), "", lesson, f"{lesson} (bench {i})") for i, lesson in
             ((i, NOVEL[i % len(NOVEL)]) for i in range(n))]
    return near, novel


def ingest_ms(port, rows, merging):
    out = []
    with connect(port, DB, autocommit=False) as c:
        c.execute("SET pg_feedback.inference = backend")
        c.execute("SELECT fb_embed('warm the model')")
        c.rollback()
        for t, wrong, correction, lesson in rows:
            if not merging:
                c.execute("SET LOCAL pg_feedback.dup_threshold = 1")
            start = c.execute("SELECT clock_timestamp()").fetchone()[0]
            c.execute("SELECT * FROM fb_ingest(%s, %s, %s, %s, 'bench')", (t, wrong, correction, lesson))
            end = c.execute("SELECT clock_timestamp()").fetchone()[0]
            c.rollback()
            out.append((end - start).total_seconds() * 1000)
    return out


def run(port, n=40):
    near, novel = notes(n)
    rows = []
    for label, sample in (("a variant of a stored lesson (neighbours compared)", near),
                          ("a lesson of another kind (no neighbour near enough)", novel)):
        on, off = ingest_ms(port, sample, True), ingest_ms(port, sample, False)
        added = statistics.median(on) - statistics.median(off)
        rows.append((f"fb_ingest at 100k, {label}: comparison on / merging off ({n} notes each)",
                     f"p50 {statistics.median(on):.1f} / {statistics.median(off):.1f} ms, p95 {percentile(on, 95):.1f} / "
                     f"{percentile(off, 95):.1f} ms: the comparison adds {added:.1f} ms per note"))
    return rows

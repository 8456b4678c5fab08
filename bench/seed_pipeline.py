"""The pipeline a team would build without pg_feedback, step by step as the seed article describes it:
a Python service with psycopg + onnxruntime + pgvector SQL + a cross-encoder.

1. embed the input in Python (bge-small-en-v1.5 int8, query prefix, CLS pooling, L2 normalisation);
2. send the vector to Postgres: pgvector nearest neighbours filtered by task_type and status, 20 candidates;
3. rerank every candidate in Python with ms-marco-MiniLM-L-12-v2 (lesson + correction, one padded batch with the
   real attention mask);
4. keep the candidates that pass a cut (a floor, a distance to the best score, at most N), best first.

Same model files, same thread count (1 intra-op thread); models are loaded once at start-up, as a long-running
service would. Only steps 1-4 per input are timed.

`compare` puts it beside fb_retrieve at equal footing: the seed's cut is calibrated the way fb_calibrate calibrates
pg_feedback's (the same grid of floors, relative cuts and note counts, the same utility: lessons found minus 0.5 per
irrelevant note injected, on the golden tune split, prose and code inputs alike), then both are scored on the test
split by the extension's own metric (_fb_question_metrics, as fb_eval scores) and timed on the same inputs.
"""

import json
import statistics
import time

import numpy as np

from common import Model, connect, percentile

LAMBDA = 0.5        # fb_calibrate's default
K = 3               # recall@3, at most 3 notes (fb_calibrate's k)


class SeedPipeline:
    def __init__(self, port, db, floor=0.0, relative=None, max_notes=K):
        self.embedder = Model("bge-small-en-v1.5")
        self.reranker = Model("ms-marco-MiniLM-L-12-v2")
        self.conn = connect(port, db)
        self.cut = (floor, relative, max_notes)

    def embed_query(self, text):
        v = self.embedder.run([self.embedder.manifest["query_prefix"] + text])[0][0]
        return v / np.linalg.norm(v)

    def scored(self, question, task_type, candidate_k=20):
        """Steps 1-3: every candidate's id, cross-encoder score and cosine, in candidate order."""
        q = self.embed_query(question)
        vec = "[" + ",".join(f"{x:.7g}" for x in q) + "]"
        cands = self.conn.execute(
            "SELECT id, lesson, correction, 1 - (embedding <=> %s::vector) FROM feedback_notes "
            "WHERE task_type = %s AND status = 'active' ORDER BY embedding <=> %s::vector LIMIT %s",
            (vec, task_type, vec, candidate_k)).fetchall()
        if not cands:
            return []
        scores = self.reranker.run([(question, f"{c[1]} {c[2]}") for c in cands])[:, 0]
        return [(c[0], float(s), float(c[3])) for c, s in zip(cands, scores)]

    def retrieve(self, question, task_type):
        return cut(self.scored(question, task_type), *self.cut)


def cut(scored, floor, relative, max_notes):
    """Step 4: ids at or above the floor and within `relative` of the best, best first, at most max_notes."""
    kept = sorted(((s, i) for i, s, _ in scored if s >= floor), reverse=True)
    if kept and relative is not None:
        kept = [(s, i) for s, i in kept if s >= kept[0][0] - relative]
    return [i for _, i in kept[:max_notes]]


def latency(port, db, qs, floor):
    pipeline = SeedPipeline(port, db, floor)
    pipeline.retrieve("warm-up question", qs[0][1])
    lat, rows = [], 0
    for q, t in qs:
        t0 = time.perf_counter()
        rows += len(pipeline.retrieve(q, t))
        lat.append((time.perf_counter() - t0) * 1000)
    return lat, rows / len(qs)


# ---------------------------------------------------------------------------------------------------------------
# At equal footing: calibrated on the tune split, scored and timed on the test split
# ---------------------------------------------------------------------------------------------------------------

def golden(c, split):
    """(id, input, task_type, kind, {note id: grade}) of one split, as fb_eval reads them."""
    grades = {g: dict(zip(ids, gr)) for g, ids, gr in c.execute(
        "SELECT golden_id, note_ids, grades FROM _fb_golden_grades(%s)", (split,)).fetchall()}
    return [(i, q, t, kind, grades.get(i, {})) for i, q, t, kind in c.execute(
        "SELECT g.id, g.query, _fb_task_type(g.task_type), _fb_input_kind(g.query) "
        "FROM _fb_golden_questions(%s) g ORDER BY g.id", (split,)).fetchall()]


def calibrate(c, scored, qs):
    """The seed's cut, chosen by the extension's own sweep (_fb_calibrate_sweep, what fb_calibrate runs: the same
    grid of floors, relative cuts and note counts, the same utility and tie-breaks) over its cross-encoder scores of
    the tune inputs, all in one group: (floor, relative cut or None, most notes)."""
    data = [{"group": "*", "graded": [[i, g] for i, g in grades.items()],
             "candidates": [{"id": i, "cosine": cos, "score": sc} for i, sc, cos in s]}
            for s, (_, _, _, _, grades) in zip(scored, qs)]
    result = c.execute("SELECT _fb_calibrate_sweep(%s::jsonb, %s, %s, false, 0, 0, 1)",
                       (json.dumps(data), LAMBDA, K)).fetchone()[0]
    choice = next(g for g in result["groups"] if g["group"] == "*")["cross_encoder"]
    return choice["floor"], choice["relative_cut"], choice["max_notes"]


SCORE = """
WITH answers AS (
    SELECT (e ->> 'id')::bigint AS id,
           ARRAY(SELECT x::bigint FROM jsonb_array_elements_text(e -> 'got') x) AS got
      FROM jsonb_array_elements(%s::jsonb) e
), scored AS (
    SELECT _fb_input_kind(g.query) AS kind, m.*,
           (SELECT count(*) FROM unnest(gr.grades) x WHERE x = 2) AS applicable,
           (SELECT count(*) FROM unnest(gr.note_ids, gr.grades) x(id, grade)
             WHERE x.grade = 2 AND x.id = ANY (a.got)) AS applied
      FROM answers a
      JOIN feedback_golden g ON g.id = a.id
      LEFT JOIN _fb_golden_grades(%s) gr ON gr.golden_id = a.id
     CROSS JOIN LATERAL _fb_question_metrics(a.got, gr.note_ids, gr.grades, %s) m
)
SELECT coalesce(kind, '(all)'), count(*),
       avg(hit::integer) FILTER (WHERE answerable),
       sum(relevant)::float8 / nullif(sum(injected), 0),
       avg((injected = 0)::integer) FILTER (WHERE NOT answerable),
       sum(applied)::float8 / nullif(sum(applicable), 0)
  FROM scored GROUP BY ROLLUP (kind) ORDER BY kind NULLS LAST
"""


def quality(c, split, answers):
    """fb_eval's numbers (recall@3, precision, clean inputs left empty, applicable notes injected) per kind of
    input, for {golden id: returned ids}."""
    payload = json.dumps([{"id": i, "got": got} for i, got in answers.items()])
    return {kind: {"inputs": n, "recall": r, "precision": p, "clean_empty": e, "applicable": a}
            for kind, n, r, p, e, a in c.execute(SCORE, (payload, split, K)).fetchall()}


def compare(port, db="feedback", log=print):
    """Rows for the benchmark table: the seed pipeline calibrated like pg_feedback, then both on the test split."""
    with connect(port, db) as c:
        tune, test = golden(c, "tune"), golden(c, "test")
    seed = SeedPipeline(port, db)
    seed.scored("warm-up question", tune[0][2])
    log(f"  seed pipeline: scoring the {len(tune)} tune inputs for its calibration")
    scored = [seed.scored(q, t) for _, q, t, _, _ in tune]
    with connect(port, db) as c:
        best = calibrate(c, scored, tune)
    seed.cut = best
    log(f"  seed cut calibrated on tune: floor {best[0]}, relative {best[1]}, at most {best[2]}")
    answers = {"seed": {}, "ours": {}}
    lat = {"seed": [], "ours": []}
    kinds = {}
    with connect(port, db) as c:
        c.execute("SELECT id FROM fb_retrieve('warm-up question', %s)", (tune[0][2],)).fetchall()
        for i, q, t, kind, _ in test:
            kinds[i] = kind
            t0 = time.perf_counter()
            answers["seed"][i] = seed.retrieve(q, t)
            lat["seed"].append((kind, (time.perf_counter() - t0) * 1000))
            t0 = time.perf_counter()   # the call fb_eval scores (the user's call, limit 20: the decision cuts)
            answers["ours"][i] = [r[0] for r in c.execute(
                "SELECT id FROM fb_retrieve(%s, %s, 20) ORDER BY rank", (q, t)).fetchall()]
            lat["ours"].append((kind, (time.perf_counter() - t0) * 1000))
        qual = {who: quality(c, "test", answers[who]) for who in answers}
    rows = [("seed pipeline at equal footing: its cut, calibrated like fb_calibrate on the golden tune split "
             f"({len(tune)} inputs, prose and code, utility = found - {LAMBDA} x irrelevant)",
             f"floor {best[0]}, relative cut {best[1]}, at most {best[2]} notes")]

    def fmt(x, pct=True):
        return "-" if x is None else f"{x * 100:.0f}%" if pct else f"{x:.2f}"

    for kind in sorted(qual["ours"], key=lambda k: (k == "(all)", k)):
        for who, name in (("seed", "seed pipeline"), ("ours", "fb_retrieve (defaults)")):
            q = qual[who][kind]
            ls = [ms for k, ms in lat[who] if kind in ("(all)", k)]
            rows.append((f"test split, {kind} inputs ({q['inputs']}): {name}",
                         f"recall@3 {fmt(q['recall'])}, applicable notes injected {fmt(q['applicable'])}, "
                         f"precision {fmt(q['precision'])}, clean inputs left empty {fmt(q['clean_empty'])}; "
                         f"p50 {statistics.median(ls):.0f} ms, p95 {percentile(ls, 95):.0f} ms"))
    s = statistics.median(ms for _, ms in lat["seed"])
    o = statistics.median(ms for _, ms in lat["ours"])
    rows.append(("advantage at equal footing (test split, all inputs): seed p50 / fb_retrieve p50", f"{s / o:.2f}x"))
    return rows

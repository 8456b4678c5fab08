"""Leave one tune author out: does the code decision's gate hold on an author it was not fitted on?

The extension's own fit (_fb_fit_decision, as fb_calibrate calls it) on all but one of the tune authors (A-D, G-J)
and its own scoring (_fb_decide) on the one left out, with the gate (the inputs' vectors given) and without it (no
vectors: the candidate model alone). Reports, per held-out tune author, the share of applicable notes injected, of
injected notes that apply and of clean inputs left empty, as fb_retrieve would decide (thresholds, at most
max_notes). Never reads the test authors (E, F). Run against the demo database (make demo):

    .venv/bin/python bench/decision_folds.py [PORT]
"""

import json
import sys

from common import ROOT, connect

TUNE = "ABCDGHIJ"

# One golden code input as fb_calibrate hands it to _fb_fit_decision, plus what _fb_decide needs.
INPUT = """
SELECT jsonb_build_object(
           'query', g.query, 'vector', v.q::real[], 'n_segments', 0,
           'graded', coalesce((SELECT jsonb_agg(jsonb_build_array(j.note_id, j.grade))
                                 FROM feedback_golden_judgments j WHERE j.golden_id = g.id), '[]'),
           'candidates', coalesce((SELECT jsonb_agg(jsonb_build_object('id', c.id, 'doc', c.doc, 'context', c.context,
                                                                       'cosine', c.similarity, 'segment', c.segment)
                                                    ORDER BY c.n)
                                     FROM _fb_code_candidates(g.query, ARRAY[v.q], _fb_task_type(g.task_type), 20,
                                                              _fb_active_model())
                                          WITH ORDINALITY AS c(id, lesson, correction, similarity, created_at, segment,
                                                               doc, context, n)), '[]'))
  FROM feedback_golden g
 CROSS JOIN LATERAL (SELECT (fb_embed_batch(ARRAY[g.query], true))[1] AS q) v
 WHERE g.query = %s AND g.task_type = %s
"""

SCORE = """
SELECT _fb_decide(%(query)s, %(docs)s, %(contexts)s, %(cosines)s::real[], %(segments)s::real[], 0, %(decision)s::jsonb,
                  %(vector)s::real[])
"""


def inputs_of(author):
    with open(ROOT / "data" / "golden_code" / f"{author}.jsonl") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [((r["question"] + "\n" if r["question"] else "") + r["input"], r["task_type"]) for r in rows]


def outcome(c, decision, inputs):
    """What the decision injects on these inputs: (applicable injected, injected that apply, clean left empty)."""
    found = applicable = injected = clean = empty = 0
    for q in inputs:
        cands = q["candidates"]
        probs = c.execute(SCORE, dict(query=q["query"], docs=[x["doc"] for x in cands],
                                      contexts=[x["context"] for x in cands], cosines=[x["cosine"] for x in cands],
                                      segments=[x["segment"] for x in cands], decision=json.dumps(decision),
                                      vector=q["vector"])).fetchone()[0] or []
        good = {i for i, g in q["graded"] if g >= 2}
        bar = [decision["threshold_context"] if x["context"].strip() and decision.get("threshold_context") is not None
               else decision["threshold"] for x in cands]
        picked = sorted((i for i in range(len(cands)) if probs[i] >= bar[i]), key=lambda i: -probs[i])
        picked = {cands[i]["id"] for i in picked[:decision["max_notes"]]}
        found += len(picked & good)
        applicable += len(good)
        injected += len(picked)
        if not good:
            clean += 1
            empty += not picked
    return found / max(applicable, 1), found / max(injected, 1), empty / max(clean, 1)


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 5433
    with connect(port, "feedback") as c:
        model = c.execute("SELECT _fb_active_model()").fetchone()[0]
        data = {a: [c.execute(INPUT, q).fetchone()[0] for q in inputs_of(a)] for a in TUNE}
        totals = {"candidates only": [], "gated": []}
        for held in TUNE:
            train = [q for a in TUNE if a != held for q in data[a]]
            for name, rows in (("candidates only", [{k: v for k, v in q.items() if k != "vector"} for q in train]),
                               ("gated", train)):
                d = c.execute("SELECT _fb_fit_decision(%s::jsonb, 5, %s)", (json.dumps(rows), model)).fetchone()[0]
                assert (d.get("gate") is not None) == (name == "gated"), name
                o = outcome(c, d, data[held])
                totals[name].append(o)
                print(f"held out {held}, {name:15s}: applicable injected {o[0]:.3f}, injected that apply {o[1]:.3f},"
                      f" clean left empty {o[2]:.3f}", flush=True)
        for name, rows in totals.items():
            mean = [sum(r[k] for r in rows) / len(rows) for k in range(3)]
            print(f"mean of the folds, {name:15s}: {mean[0]:.3f} / {mean[1]:.3f} / {mean[2]:.3f}")


if __name__ == "__main__":
    main()

"""Quality figures for BENCHMARKS.md, from the same `make bench` run as the speed figures:

- fb_eval on the golden test split, per kind of input (paraphrase questions, code inputs by the held-out authors)
  and overall, on the demo database (sample notes, shipped settings);
- the guard corpora per author (the reports `make test` gates on: injection screening, secret redaction);
- the near-duplicate / revision comparison per author (data/dedup/pairs, R held out).

The last two are the core crate's own programs (cargo, real models), run as `make test` runs them; their reports
are kept whole as text blocks.
"""

import os
import subprocess

from common import ROOT, connect, model_dir, ort_library

EVAL = """
SELECT kind, questions, answerable, recall_at_k, "precision", no_answer_correct, applicable_injected, injected_apply,
       mean_injected, scored_by
  FROM fb_eval(3, record => false, split => 'test')
 WHERE task_type = '(all)'
 ORDER BY kind NULLS LAST
"""


def golden_rows(port):
    """One row per kind of the test split's fb_eval (the shipped settings and decision)."""
    rows = []
    with connect(port, "feedback") as c:
        for kind, n, ans, rec, prec, empty, appl, apply_, inj, by in c.execute(EVAL).fetchall():
            f = lambda x: "-" if x is None else f"{x:.3f}"
            rows.append((f"quality, golden test split, {kind or 'all'} inputs ({n}, {ans} answerable), fb_eval",
                         f"recall@3 {f(rec)}, precision {f(prec)}, clean inputs left empty {f(empty)}, applicable "
                         f"notes injected {f(appl)}, injected notes that apply {f(apply_)}; {f(inj)} notes per "
                         f"answerable input"))
    return rows


# Each golden code input's 20 candidates in the shipped decision's order, with its probabilities and the grades.
CODE_ORDER = """
SELECT g.split, coalesce(array_agg(c.id ORDER BY c.n) FILTER (WHERE c.id IS NOT NULL), '{}'),
       _fb_decide(g.query, array_agg(c.doc ORDER BY c.n), array_agg(c.context ORDER BY c.n),
                  array_agg(c.similarity ORDER BY c.n), array_agg(c.segment ORDER BY c.n), 0, _fb_shipped_decision(),
                  (fb_embed_batch(ARRAY[g.query], true))[1]::real[]),
       (SELECT coalesce(array_agg(j.note_id), '{}') FROM feedback_golden_judgments j
         WHERE j.golden_id = g.id AND j.grade = 2)
  FROM feedback_golden g
  LEFT JOIN LATERAL _fb_code_candidates(g.query, ARRAY[(fb_embed_batch(ARRAY[g.query], true))[1]],
                                        _fb_task_type(g.task_type), 20, _fb_active_model())
            WITH ORDINALITY AS c(id, lesson, correction, similarity, created_at, segment, doc, context, n) ON true
 WHERE _fb_input_kind(g.query) = 'code'
 GROUP BY g.id, g.split, g.query
"""


def code_ranking_rows(port):
    """Ranking against deciding on the golden code inputs, per split: how many applicable notes the shipped
    decision's first k candidates hold (recall@k), and how well its best probability tells an input to which a
    note applies from a clean one (the AUC of that maximum: 0.5 is chance). Rates only."""
    rows = []
    with connect(port, "feedback") as c:
        data = c.execute(CODE_ORDER).fetchall()
    for split in ("tune", "test"):
        inputs = [(ids, probs or [], set(good)) for s, ids, probs, good in data if s == split]
        applicable = sum(len(good) for _, _, good in inputs)
        recall = []
        for k in (1, 3, 5):
            hits = sum(len(good & {i for i, _ in sorted(zip(ids, probs), key=lambda t: -t[1])[:k]})
                       for ids, probs, good in inputs)
            recall.append(f"recall@{k} {hits / max(applicable, 1):.3f}")
        best = lambda probs: max(probs, default=0.0)
        with_note = [best(p) for _, p, good in inputs if good]
        clean = [best(p) for _, p, good in inputs if not good]
        pairs = [(a > b) + 0.5 * (a == b) for a in with_note for b in clean]
        auc = sum(pairs) / max(len(pairs), 1)
        rows.append((f"code inputs, {split} split ({len(inputs)}): ranking against deciding, shipped decision",
                     f"{', '.join(recall)} of {applicable} applicable notes; AUC of the best probability, "
                     f"{len(with_note)} inputs with an applicable note against {len(clean)} clean: {auc:.3f}"))
    return rows


def _cargo(args, log):
    # The model files and ONNX Runtime the extension loads, as scripts/test.sh passes them.
    env = dict(os.environ, FB_MODEL_DIR=str(model_dir()), FB_ORT_LIBRARY=str(ort_library()))
    env.pop("PGOPTIONS", None)
    log(f"  cargo {' '.join(args)}")
    out = subprocess.run(["cargo", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        return f"FAILED (exit {out.returncode}):\n{out.stderr[-3000:]}"
    return out.stdout + out.stderr


def _report(text, start):
    """The program's report from the line that starts it (cargo's build and test-harness lines dropped)."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith(start)), 0)
    keep = [line for line in lines[first:] if not line.startswith(("test ", "running ", "     Running",
                                                                    "    Finished", "   Compiling"))]
    while keep and not keep[-1].strip() or keep and keep[-1].startswith("test result"):
        keep.pop()
    return "\n".join(keep).rstrip()


def corpora(log=print):
    """[(title, report text)] of the guard corpora and the dedup pairs, per author."""
    out = []
    text = _cargo(["test", "-p", "feedback_core", "--test", "injection_corpus", "--", "--nocapture"], log)
    out.append(("Injection screening per author (`cargo test -p feedback_core --test injection_corpus -- "
                "--nocapture`)", _report(text, "==")))
    text = _cargo(["test", "-p", "feedback_core", "--test", "secrets_corpus", "--", "--nocapture"], log)
    out.append(("Secret redaction per author (`cargo test -p feedback_core --test secrets_corpus -- --nocapture`)",
                _report(text, "==")))
    pairs = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "data" / "dedup" / "pairs").glob("*.jsonl"))
    text = _cargo(["run", "--release", "-q", "-p", "feedback_core", "--example", "dedup_pairs", "--", "--notes",
                   "data/sample_notes.csv", *pairs], log)
    out.append(("Near-duplicates and revisions per author (`cargo run --release -p feedback_core --example "
                "dedup_pairs -- --notes data/sample_notes.csv data/dedup/pairs/*.jsonl`; P, Q tune, R held out)",
                _report(text, "author")))
    return out

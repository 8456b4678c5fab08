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

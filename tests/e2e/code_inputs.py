"""End-to-end: retrieval for code inputs (issue 19) on the project's golden sets, through real sessions.

- The held-out authors' code inputs (data/golden_code E and F, split test: never used to fit anything) are scored
  by fb_eval as a reviewer, with the shipped decision and the sample notes' contexts: the share of applicable notes
  injected, of injected notes that apply and of clean inputs left empty must stay at or above what 0.12.0 measured
  (regression floors; the issue's targets, 0.7 each, are NOT met) and above the 0.6.0 pipeline's.
- The tune authors written after the shipped decision was fitted (G-J) are a second check of it, through fb_retrieve
  as a reader: regression floors again.
- The paraphrase questions' test split is no worse than before on the same kind of CPU: 0.6.0 measured recall@3
  0.669, precision 0.713, no-answer 0.738 on AVX-512 VNNI; the int8 kernels of an AVX2-only machine move a few
  answers, and there 0.9.0 measured 0.686 / 0.706 / 0.726.
- fb_calibrate fits the decision (and its gate on the input's vector) on the tune authors' inputs, fb_retrieve
  then uses it; deleting it brings back
  the shipped one.
- A caller's final_k and min_score are a ranking mode: final_k rows in score order, for prose and code inputs.
- The README's retrieval examples return what the README shows.

Run by make test against the end-to-end server: python tests/e2e/code_inputs.py PORT PG_BINDIR
"""

import json
import sys

from harness import (ROOT, connect as _connect, ensure_roles, expect_error, fresh_database, isa, load_sample, one,
                     run_tests)

PORT = int(sys.argv[1])
BINDIR = sys.argv[2]
DB = "fb_code"
REVIEWER, READER, WRITER = "fb_c_reviewer", "fb_c_reader", "fb_c_writer"

# The held-out authors (E, F), shipped decision, notes with their contexts, on AVX-512 VNNI: 0.7.0-0.10.0 (input
# embedded whole and in segments) measured 0.423 / 0.658 / 0.383; 0.11.0 (whole input only, a third of the embedding
# time) 0.396 / 0.632 / 0.362; 0.12.0 (the decision's gate on the input's vector) 0.533 / 0.610 / 0.511. Floors
# about 2.5 points below: other int8 kernels move a few answers.
CODE_FLOORS = {"applicable_injected": 0.50, "injected_apply": 0.58, "no_answer_correct": 0.48}
# The tune authors the shipped decision was not fitted on (G-J, written after it; fb_calibrate now fits on them
# too): 0.443 / 0.530 / 0.510 on AVX-512 VNNI when first measured. Floors about 2.5 points below (clean inputs:
# 4 points, 3 of 96).
UNSEEN_AUTHORS = "GHIJ"
UNSEEN_FLOORS = {"applicable_injected": 0.42, "injected_apply": 0.505, "no_answer_correct": 0.47}
# 0.6.0's pipeline on the same inputs: 0.126 / 0.311 / 0.319.
CODE_BEFORE = {"applicable_injected": 0.126, "injected_apply": 0.311}
# The paraphrase questions' test split before this pipeline, per instruction set (harness.isa): 0.6.0 on AVX-512
# VNNI; 0.9.0 on AVX2 (the same figures as 0.10.0 there, to the last digit).
PROSE_TODAY = {"avx512vnni": {"recall_at_k": 0.669, "precision": 0.713, "no_answer_correct": 0.738},
               "avx2": {"recall_at_k": 0.686, "precision": 0.706, "no_answer_correct": 0.726}}

# The README's code example.
CODE_EXAMPLE = """def get_user(request):
    user_id = request.args["id"]   # the route only matches digits
    cur.execute("SELECT * FROM users WHERE id = " + user_id)
    return cur.fetchone()"""
NOTE_1 = "Numeric-looking input concatenated into SQL is still injectable; bind it as a parameter."


def connect(user="postgres", autocommit=True):
    return _connect(PORT, DB, user=user, autocommit=autocommit)


def setup():
    fresh_database(PORT, DB)
    ensure_roles(PORT, (REVIEWER, READER, WRITER), (),
                 [("feedback_reviewer", [REVIEWER]), ("feedback_reader", [READER]), ("feedback_writer", [WRITER])])
    load_sample(PORT, DB, BINDIR)


def eval_rows(conn):
    cur = conn.execute("SELECT * FROM fb_eval(3, record => false, split => 'test')")
    cols = [d.name for d in cur.description]
    return {(r["kind"], r["task_type"]): r for r in (dict(zip(cols, row)) for row in cur.fetchall())}


def test_held_out_code_inputs_and_paraphrases():
    with connect(REVIEWER) as c:
        rows = eval_rows(c)
    code, prose = rows[("code", "(all)")], rows[("prose", "(all)")]
    assert code["questions"] == 160 and code["scored_by"] in ("cross-encoder", "cosine"), code
    for k, floor in CODE_FLOORS.items():
        assert code[k] >= floor, (k, code[k], floor)
    for k, before in CODE_BEFORE.items():
        assert code[k] > before, (k, code[k], before)
    for k, today in PROSE_TODAY[isa()].items():
        assert prose[k] >= today - 0.0005, (k, prose[k], today)
    print(f"# held-out code inputs: applicable injected {code['applicable_injected']:.3f}, injected that apply "
          f"{code['injected_apply']:.3f}, clean left empty {code['no_answer_correct']:.3f}; paraphrases: recall@3 "
          f"{prose['recall_at_k']:.3f}, precision {prose['precision']:.3f}, no-answer {prose['no_answer_correct']:.3f}")


def test_authors_the_shipped_decision_never_saw():
    """fb_retrieve's defaults, as a reader, over the inputs of the tune authors written after the shipped decision was
    fitted (on A-D): a second check, on 320 more inputs, that its figures carry to code it was not fitted on."""
    found = applicable = injected = clean = empty = 0
    with connect(READER) as c:
        for author in UNSEEN_AUTHORS:
            with open(f"{ROOT}/data/golden_code/{author}.jsonl") as f:
                rows = [json.loads(line) for line in f if line.strip()]
            for r in rows:
                query = (r["question"] + "\n" if r["question"] else "") + r["input"]
                got = {x[0] for x in c.execute("SELECT lesson FROM fb_retrieve(%s, %s)", (query, r["task_type"]))}
                good = {lesson for lesson, grade in r["grades"].items() if grade >= 2}
                found += len(got & good)
                applicable += len(good)
                injected += len(got)
                clean += not good
                empty += not good and not got
    got = {"applicable_injected": found / applicable, "injected_apply": found / injected,
           "no_answer_correct": empty / clean}
    assert applicable > 300 and clean == 96, (applicable, clean)
    for k, floor in UNSEEN_FLOORS.items():
        assert got[k] >= floor, (k, got[k], floor)
    print("# authors G-J, shipped decision: " + ", ".join(f"{k} {v:.3f}" for k, v in got.items()))


def test_calibrate_fits_the_decision_and_retrieval_uses_it():
    with connect(REVIEWER, autocommit=False) as c:
        row = c.execute("SELECT questions, max_notes, recall_at_3, \"precision\", no_answer_correct"
                        "  FROM fb_calibrate() WHERE task_type = '(code)'").fetchone()
        assert row is not None and row[0] >= 300 and row[1] == 5, row
        assert all(0 < x <= 1 for x in row[2:]), row
        d = one(c, "SELECT decision FROM feedback_retrieval_settings WHERE task_type = '*'")
        assert d["embedding_model"] == one(c, "SELECT _fb_active_model()"), d["embedding_model"]
        assert d["fitted_on"]["inputs"] == row[0] and d["threshold_context"] is not None, d["fitted_on"]
        # The gate reads the input's own vector: one weight per dimension of the active model's vectors.
        assert len(d["gate"]["weights"]) == one(c, "SELECT vector_dims(fb_embed_query('x'))"), d.get("gate")
        # Fitted on the whole input alone (code_segments => 0), so fb_retrieve embeds nothing beside it.
        assert d["max_segments"] == 0 and one(c, "SELECT cardinality(_fb_segments(%s, %s::jsonb))",
                                                (CODE_EXAMPLE * 3, json.dumps(d))) == 0, d["max_segments"]
        assert one(c, "SELECT _fb_decision(_fb_active_model()) = decision FROM feedback_retrieval_settings"
                      " WHERE task_type = '*'")
        got = c.execute("SELECT scored_by, rerank_score FROM fb_retrieve(%s, 'sql_injection_scan', final_k => 3,"
                        " min_score => 0)", (CODE_EXAMPLE,)).fetchall()
        assert len(got) == 3 and {r[0] for r in got} == {"decision"}, got
        # The team's fit, not the shipped one, is what scores: a changed threshold changes the answer.
        c.execute("UPDATE feedback_retrieval_settings SET decision = decision || '{\"threshold\": 0,"
                  " \"threshold_context\": 0}' WHERE task_type = '*'")
        assert one(c, "SELECT count(*) FROM fb_retrieve(%s, 'sql_injection_scan')", (CODE_EXAMPLE,)) == 5
        c.execute("UPDATE feedback_retrieval_settings SET decision = NULL WHERE task_type = '*'")
        assert one(c, "SELECT _fb_decision(_fb_active_model()) = _fb_shipped_decision()")
        c.rollback()


def test_a_notes_context_is_redacted_kept_and_purged():
    key = "AKIA" + "Q3EGRT7XJ2LWPB5N"   # an AWS access key id's shape (not a real key)
    context = f'boto3.client("s3", aws_access_key_id="{key}")\nclient.list_buckets()'
    with connect(WRITER) as w:
        nid, action = w.execute("SELECT * FROM fb_ingest('secrets_scan', 'Looks fine.', 'The key is live: rotate it.',"
                                " 'A hard-coded cloud key in a client constructor is a leak.', context => %s)",
                                (context,)).fetchone()
        assert action == "inserted", action
        # A re-submission with another context keeps the latest one (redacted too).
        w.execute("SELECT * FROM fb_ingest('secrets_scan', '', 'The key is live: rotate it.',"
                  " 'A hard-coded cloud key in a client constructor is a leak.', context => %s)",
                  (context.replace("list_buckets", "list_objects"),))
    with connect() as su:
        stored, kinds = su.execute("SELECT context, redactions FROM feedback_notes WHERE id = %s", (nid,)).fetchone()
        assert key not in stored and "list_objects" in stored and "aws_access_key" in kinds, (stored, kinds)
        su.execute("UPDATE feedback_notes SET context = %s WHERE id = %s", (context, nid))
        assert key not in one(su, "SELECT context FROM feedback_notes WHERE id = %s", (nid,))
        expect_error(su, "SELECT * FROM fb_ingest_batch(ARRAY[ROW('secrets_scan', '', 'x', 'y', NULL)::fb_note_input],"
                         " NULL, ARRAY['a', 'b'])", "22023")
    with connect(REVIEWER) as r:
        r.execute("SELECT fb_purge(%s, 'test: a leaked key')", (nid,))
    with connect() as su:
        assert one(su, "SELECT context FROM feedback_notes WHERE id = %s", (nid,)) == ""


def test_ranking_mode_returns_final_k_in_score_order():
    with connect(READER) as c:
        for query in ("The user id from the URL is glued into the SELECT string, is that injectable?", CODE_EXAMPLE):
            rows = c.execute("SELECT rank, coalesce(rerank_score, similarity), scored_by FROM fb_retrieve(%s,"
                             " 'sql_injection_scan', final_k => 10, min_score => -1e9)", (query,)).fetchall()
            assert [r[0] for r in rows] == list(range(1, 11)), rows
            scores = [r[1] for r in rows]
            assert scores == sorted(scores, reverse=True), rows


def test_readme_examples():
    with connect(READER) as c:
        rows = c.execute("SELECT rank, lesson, scored_by FROM fb_retrieve('The user id from the URL is glued into"
                         " the SELECT string, is that injectable?', 'sql_injection_scan')").fetchall()
        assert rows == [(1, NOTE_1, "cross-encoder")], rows
        assert one(c, "SELECT count(*) FROM fb_retrieve('What is the capital of Australia?',"
                      " 'sql_injection_scan')") == 0
        prompt = one(c, "SELECT fb_build_prompt('The user id from the URL is glued into the SELECT string, is that"
                        " injectable?', 'sql_injection_scan', max_context_tokens => 800)")
        assert f"\n1. {NOTE_1} (Correction: " in prompt and "\n2. " not in prompt, prompt
        rows = c.execute("SELECT rank, lesson, scored_by FROM fb_retrieve(%s, 'sql_injection_scan', final_k => 3,"
                         " min_score => 0)", (CODE_EXAMPLE,)).fetchall()
        assert [r[0] for r in rows] == [1, 2, 3] and rows[0][1] == NOTE_1, rows
        assert rows[1][1] == "Bound LIKE patterns still need wildcard escaping of % and _.", rows
        assert {r[2] for r in rows} == {"decision"}, rows
        assert one(c, "SELECT count(*) FROM fb_retrieve(%s, 'sql_injection_scan')", (CODE_EXAMPLE,)) == 0


if __name__ == "__main__":
    setup()
    run_tests("code_inputs", [test_held_out_code_inputs_and_paraphrases, test_authors_the_shipped_decision_never_saw,
                              test_calibrate_fits_the_decision_and_retrieval_uses_it,
                              test_a_notes_context_is_redacted_kept_and_purged,
                              test_ranking_mode_returns_final_k_in_score_order, test_readme_examples])

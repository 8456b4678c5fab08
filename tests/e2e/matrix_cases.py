"""The bad-input matrix's table (tests/e2e/matrix.py runs it): what every public function must do with bad input.

Two parts:

- FUNCTIONS: per public fb_* function, the role that calls it, how (SELECT, or CALL for a procedure), whether it
  runs inside a transaction that is rolled back (every function that changes data: the fixture must survive), a
  good call (one value per argument, by argument name), and the EXPECTED outcome when each argument alone is NULL.
  matrix.py reads the function list and argument names from the catalog, so a new function or argument makes a
  case that fails until its expectation is written down here.
- CASES: explicit cases (blank and control-character text, 1 MB / 100 MB text, 10,000-element arrays, invalid
  UTF-8, limits, unknown task_type and models, broken model files, a wrong ONNX Runtime path, statement_timeout
  and pg_cancel_backend during large batches and reranks).

An expectation is Err(sqlstate) (an ERROR with that SQLSTATE and a non-empty HINT; hint=False only for errors
Postgres itself raises before pg_feedback runs, or for 57014) or a result check. ByMode gives different
expectations for worker mode (pg_feedback preloaded) and backend mode. `note` marks a debatable expectation.

Placeholders <<name>> in SQL are filled from the fixture (note ids, the retrieval id, broken model dirs...).
"""

# ---------------------------------------------------------------------------------------------------------------
# Expectations
# ---------------------------------------------------------------------------------------------------------------


class Err:
    def __init__(self, sqlstate, hint=True):
        self.sqlstate, self.hint = sqlstate, hint

    def __repr__(self):
        return f"ERROR {self.sqlstate}" + (" + HINT" if self.hint else "")


class Res:
    """A result check: pred(rows, ctx) is true for the documented result."""

    def __init__(self, desc, pred):
        self.desc, self.pred = desc, pred

    def __repr__(self):
        return self.desc


class SameAs(Res):
    """The same rows as another statement run on the same connection (e.g. the call with the default spelled out)."""

    def __init__(self, sql, desc=None):
        self.sql = sql
        super().__init__(desc or f"the rows of: {sql}", None)


class ByMode:
    def __init__(self, worker, backend):
        self.worker, self.backend = worker, backend

    def __repr__(self):
        return f"worker mode: {self.worker!r}; backend mode: {self.backend!r}"


def rows(expected, desc=None):
    return Res(desc or repr(expected), lambda got, ctx: got == expected)


def value(v):
    return rows([(v,)], repr(v))


NULL = rows([(None,)], "NULL")
NO_ROWS = rows([], "no rows")
TRUE = value(True)
PROBE = Res("the probe's rows (same ids, same order)", lambda got, ctx: got == ctx.probe)
HEX64 = Res("a 64-character hex digest", lambda got, ctx: len(got) == 1 and isinstance(got[0][0], str)
            and len(got[0][0]) == 64 and all(c in "0123456789abcdef" for c in got[0][0]))
NO_NOTES_PROMPT = Res("a prompt whose block says (no relevant prior corrections)",
                      lambda got, ctx: len(got) == 1 and got[0][0] is not None
                      and "(no relevant prior corrections)" in got[0][0])


# ---------------------------------------------------------------------------------------------------------------
# Fixed values
# ---------------------------------------------------------------------------------------------------------------

Q = "Route param looks like an integer and gets glued into the query string, is that safe?"
QL = f"'{Q}'"
TT = "sql_injection_scan"
TTL = f"'{TT}'"
MODEL = "'bge-small-en-v1.5'"          # the active model, by its folder name
MB1 = "repeat('x ', 524288)"          # 1 MiB, built server-side
MB100 = "repeat('x', 104857600)"      # 100 MiB, built server-side
BAD_UTF8 = r"convert_from('\xff'::bytea, 'UTF8')"
BLANK = r"E' \t\n'"
CONTROL = r"E'\x01\x02'"
PROBE_ARGS = "final_k => 3, min_score => -100"   # every scored candidate (at most rerank_max_pairs, 3), best first
PROBE_SQL = f"SELECT rank, id, scored_by FROM fb_retrieve({QL}, {TTL}, {PROBE_ARGS})"
RETRIEVE_IDS = "SELECT id FROM fb_retrieve({args})"
R_BASE = f"{QL}, {TTL}, 20, 3, -100, true, {MODEL}"

NULL_MODEL = "documented: a NULL model means the active model, in every function that takes one"
DEBATE_BLANK_QUERY = ("debatable: an empty question has nothing to retrieve for; the README promises zero rows when "
                      "nothing applies, and the text-search stage prints a NOTICE for it.")
# fb_retrieve of NULL finds no note, and fb_build_prompt builds the prompt of what fb_retrieve found.
PROMPT_NO_LESSONS = (Res("the prompt without lessons", lambda got, ctx: len(got) == 1 and got[0][0] is not None
                         and "(no relevant prior corrections)" in got[0][0]),
                     "documented: the prompt of what fb_retrieve finds for NULL (nothing)")

# ---------------------------------------------------------------------------------------------------------------
# FUNCTIONS: the good call of every public function and what NULL in each argument must give
# ---------------------------------------------------------------------------------------------------------------
# role: reader / writer / reviewer / superuser (least privilege that may call it). txn: run inside BEGIN ...
# ROLLBACK (the function changes data). kind: select (default) or call. select: the statement around {call}.
# nulls: argument name ("$1" for an unnamed one) -> expectation, optionally (expectation, note).

FUNCTIONS = {
    # -- embeddings and models (readers) --
    "fb_embed": dict(role="reader", args={"$1": "'Bind the id as a parameter.'"},
                     select="SELECT vector_dims(r) FROM {call} AS r", nulls={"$1": NULL}),
    "fb_embed_query": dict(role="reader", args={"$1": QL},
                           select="SELECT vector_dims(r) FROM {call} AS r", nulls={"$1": NULL}),
    "fb_embed_batch": dict(
        role="reader", args={"texts": "ARRAY['first text', 'second text']", "query": "false", "model": MODEL},
        select="SELECT cardinality(r), (SELECT count(*)::int FROM unnest(r) e WHERE vector_dims(e) = 384) "
               "FROM {call} AS r",
        nulls={"texts": rows([(None, 0)], "NULL"),
               "query": (rows([(None, 0)], "NULL"), "NULL in, NULL out (the function is not STRICT but acts so)"),
               "model": rows([(2, 2)], "two vectors of the active model (the default applied)")}),
    "fb_rerank": dict(role="reader", args={"query": QL, "passages": "ARRAY['Bind it.', 'Use a join.']"},
                      select="SELECT cardinality(r), (SELECT count(*)::int FROM unnest(r) s WHERE s IS NOT NULL) "
                             "FROM {call} AS r",
                      nulls={"query": rows([(None, 0)], "NULL"), "passages": rows([(None, 0)], "NULL")}),
    "fb_count_tokens": dict(role="reader", args={"text": "'three little words'"}, nulls={"text": NULL}),
    "fb_embedding_model": dict(role="reader", args={}, nulls={}),
    "fb_rerank_model": dict(role="reader", args={}, nulls={}),
    "fb_models": dict(role="reader", args={}, select="SELECT count(*) FROM {call}", nulls={}),
    "fb_model_stats": dict(role="reader", args={}, select="SELECT count(*) FROM {call}", nulls={}),
    # -- pure text functions (readers) --
    "fb_content_hash": dict(
        role="reader",
        args={"task_type": "'perf_review'", "lesson": "'Avoid N+1 queries.'", "correction": "'Use a join.'",
              "tenant": "'fb_mx_team'"},
        nulls={"task_type": NULL, "lesson": NULL, "correction": NULL,
               "tenant": SameAs("SELECT fb_content_hash('perf_review', 'Avoid N+1 queries.', 'Use a join.')",
                                "the hash of the shared note (no tenant)")}),
    "fb_document_text": dict(role="reader", args={"task_type": "'perf_review'", "lesson": "'Avoid N+1 queries.'"},
                             nulls={"task_type": NULL, "lesson": NULL}),
    "fb_screen": dict(role="reader", args={"text": "'Bind the id.'"}, select="SELECT r::text FROM {call} AS r",
                      nulls={"text": NULL}),
    "fb_redact": dict(role="reader", args={"text": "'password=hunter2hunter2'"}, nulls={"text": NULL}),
    # -- retrieval (readers) --
    "fb_retrieve": dict(
        role="reader",
        args={"query": QL, "task_type": TTL, "candidate_k": "20", "final_k": "3", "min_score": "-100",
              "rerank": "true", "model": MODEL},
        select="SELECT id FROM {call}",
        nulls={
            "query": NO_ROWS,
            "task_type": NO_ROWS,
            "candidate_k": (Err("22023"), "debatable: candidate_k has a default (20), but an explicit NULL is "
                                          "refused like an out-of-range value"),
            "final_k": SameAs(RETRIEVE_IDS.format(args=f"{QL}, {TTL}, 20, 1, -100, true, {MODEL}"),
                              "the calibrated max_notes (1) applied"),
            "min_score": SameAs(RETRIEVE_IDS.format(args=f"{QL}, {TTL}, 20, 3, -5.75, true, {MODEL}"),
                                "the calibrated floor (-5.75) applied"),
            "rerank": SameAs(RETRIEVE_IDS.format(args=R_BASE), "the setting (pg_feedback.rerank = on) applied"),
            "model": SameAs(RETRIEVE_IDS.format(args=R_BASE), "the active model"),
        }),
    "fb_find_duplicate": dict(role="reader",
                              args={"task_type": TTL, "lesson": "'Concatenating a numeric id into SQL is injectable.'"},
                              select="SELECT id FROM {call}", nulls={"task_type": NO_ROWS, "lesson": NO_ROWS}),
    "fb_compare_notes": dict(role="reader",
                             args={"a": "'Prefer tabs over spaces.'", "b": "'Prefer spaces over tabs.'", "task_type": TTL},
                             select="SELECT {call}", nulls={"a": NULL, "b": NULL, "task_type": NULL}),
    "fb_build_prompt": dict(
        role="reader",
        args={"query": QL, "task_type": TTL, "base_instructions": "'You review code.'", "max_context_tokens": "800"},
        select="SELECT r FROM {call} AS r",
        nulls={"query": PROMPT_NO_LESSONS,
               "task_type": PROMPT_NO_LESSONS,
               "base_instructions": (Res("a prompt with the fenced block and no instructions",
                                         lambda got, ctx: len(got) == 1 and got[0][0] is not None
                                         and got[0][0].lstrip().startswith("<prior_corrections>")),
                                     "debatable: NULL instructions read as none"),
               "max_context_tokens": Err("22023")}),
    # -- ingest (writers, rolled back) --
    "fb_ingest": dict(
        role="writer", txn=True,
        args={"task_type": "'matrix_ingest'", "wrong_answer": "'It was fine.'",
              # Benign text clear of the learned screen's threshold (about 1.5% of benign notes are held for a
              # reviewer; the first wording here was, at p = 0.51).
              "correction": "'The matrix checks what NULL in each argument of fb_ingest returns.'",
              "lesson": "'A NULL argument of a public function gets its documented answer, not a crash.'",
              "source": "'matrix'",
              "tenant": "'fb_mx_team'",
              "context": "'SELECT * FROM t WHERE id = ' || 'x'"},
        select="SELECT action FROM {call}",
        nulls={"task_type": Err("22023"), "wrong_answer": value("inserted"), "correction": Err("22023"),
               "lesson": Err("22023"), "source": value("inserted"),
               "tenant": (value("inserted"), "a shared note"), "context": (value("inserted"), "no context")}),
    "fb_ingest_batch": dict(
        role="writer", txn=True,
        args={"notes": "ARRAY[ROW('matrix_ingest', 'It was fine.', 'Matrix correction: batches check NULLs.', "
                       "'Matrix lesson: a NULL batch gets a documented answer.', 'matrix')::fb_note_input]",
              "tenant": "'fb_mx_team'",
              "contexts": "ARRAY['ids = request.args[\"ids\"]']"},
        select="SELECT action FROM {call}",
        nulls={"notes": NO_ROWS, "tenant": (value("inserted"), "a shared note"),
               "contexts": (value("inserted"), "no contexts")}),
    # -- review and lifecycle (reviewers, rolled back) --
    "fb_approve": dict(role="reviewer", txn=True, args={"note_id": "<<pending_id>>", "reason": "'checked'"},
                       nulls={"note_id": Err("P0002"), "reason": TRUE}),
    "fb_reject": dict(role="reviewer", txn=True, args={"note_id": "<<pending_id>>", "reason": "'not useful'"},
                      nulls={"note_id": Err("P0002"), "reason": Err("22023")}),
    "fb_deprecate": dict(role="reviewer", txn=True, args={"note_id": "<<spare_id>>", "reason": "'superseded'"},
                         nulls={"note_id": Err("P0002"), "reason": TRUE}),
    "fb_restore": dict(role="reviewer", txn=True, args={"note_id": "<<deprecated_id>>", "reason": "'back'"},
                       nulls={"note_id": Err("P0002"), "reason": TRUE}),
    "fb_deprecate_stale": dict(role="reviewer", txn=True,
                               args={"older_than": "interval '1000 years'", "task_type": "'matrix_spare'"},
                               nulls={"older_than": Err("22023"), "task_type": (value(0), "every task_type")}),
    "fb_purge": dict(role="reviewer", txn=True, args={"note_id": "<<spare_id>>", "reason": "'leaked'"},
                     nulls={"note_id": Err("P0002"), "reason": Err("22023")}),
    "fb_purge_merged": dict(role="reviewer", txn=True, args={"merged_hash": "'<<merged_hash>>'", "reason": "'leaked'"},
                            nulls={"merged_hash": Err("P0002"), "reason": Err("22023")}),
    "fb_unmerge": dict(role="reviewer", txn=True, args={"merge_id": "<<merge_id>>", "reason": "'folded away'"},
                       select="SELECT {call}",
                       nulls={"merge_id": Err("P0002"),
                              "reason": Res("the new note's id", lambda got, ctx: len(got) == 1 and got[0][0] is not None)}),
    "fb_merge": dict(role="reviewer", txn=True,
                     args={"note_id": "<<pending_id>>", "into_id": "<<spare_id>>", "reason": "'a rewording'"},
                     select="SELECT {call}",
                     nulls={"note_id": Err("P0002"), "into_id": Err("P0002"), "reason": TRUE}),
    "fb_find_conflicts": dict(role="reviewer", txn=True, args={"task_type": TTL, "record": "false"},
                              select="SELECT count(*) >= 0 FROM {call}",
                              nulls={"task_type": TRUE, "record": (TRUE, "debatable: NULL record reads as false")}),
    "fb_notes_by": dict(role="reviewer", args={"role": "'postgres'", "since": "'-infinity'"},
                        select="SELECT count(*) > 0 FROM {call}",
                        nulls={"role": Err("22023"), "since": Err("22023")}),
    "fb_purge_by": dict(role="reviewer", txn=True,
                        args={"role": "'nobody_stored_anything'", "since": "'-infinity'", "reason": "'compromised'"},
                        select="SELECT count(*) FROM {call}",
                        nulls={"role": Err("22023"), "since": Err("22023"), "reason": Err("22023")}),
    # -- evaluation (reviewers, rolled back: fb_eval records runs, fb_calibrate may apply) --
    "fb_eval": dict(
        role="reviewer", txn=True, args={"k": "3", "record": "false", "model": MODEL, "split": "'test'"},
        select="SELECT task_type, questions FROM {call}",
        nulls={"k": Err("22023"),
               "record": (SameAs("SELECT task_type, questions FROM fb_eval(3, false, 'bge-small-en-v1.5', 'test')",
                                 "the same rows as record => false"), "debatable: NULL record = not recorded"),
               "model": SameAs("SELECT task_type, questions FROM fb_eval(3, false, 'bge-small-en-v1.5', 'test')",
                               "the active model"),
               "split": Res("every golden question ((all) row)",
                            lambda got, ctx: ("(all)", ctx.fixture["golden_count"]) in got)}),
    "fb_calibrate": dict(
        role="reviewer", txn=True,
        args={"split": "'tune'", "lambda": "0.5", "per_task_type": "true", "min_questions": "50",
              "tolerance": "0", "apply": "false", "code_segments": "0"},
        select="SELECT task_type FROM {call}",
        nulls={"split": Res("a '*' row over every golden question", lambda got, ctx: ("*",) in got),
               "lambda": Err("22023"),
               "per_task_type": (Err("22023"), "refused like a NULL lambda, tolerance or min_questions"),
               "min_questions": Err("22023"),
               "tolerance": Err("22023"),
               "apply": (SameAs("SELECT task_type FROM fb_calibrate('tune', 0.5, true, 50, 0, false)",
                                "the rows of apply => false"), "debatable: NULL apply = not applied"),
               "code_segments": Err("22023")}),
    "fb_eval_ann": dict(role="reviewer", args={"sample": "10", "k": "5", "p_task_type": TTL},
                        select="SELECT task_type, queries FROM {call}",
                        nulls={"sample": (Err("22023"), "refused like a NULL k"), "k": Err("22023"),
                               "p_task_type": (Res("every task_type, and the (all) row",
                                                   lambda got, ctx: any(r[0] == "(all)" for r in got)),
                                               "the default: notes of every task_type")}),
    "fb_judge": dict(role="reviewer", txn=True,
                     args={"retrieval_id": "<<retrieval_id>>", "note_id": "<<judged_note_id>>", "relevant": "true"},
                     nulls={"retrieval_id": Err("22004"), "note_id": Err("22004"), "relevant": Err("22004")}),
    # -- model changes (superuser) --
    "fb_reembed": dict(role="superuser", kind="call", args={"model": MODEL, "batch_size": "256"},
                       nulls={"model": (Res("the call succeeds (the active model: nothing to re-embed)",
                                             lambda got, ctx: got is None), NULL_MODEL),
                              "batch_size": Err("22023")}),
    "fb_maintain": dict(role="superuser", txn=True, args={"p_task_type": TTL, "measure": "true"},
                        select="SELECT count(*) FROM {call}",
                        nulls={"p_task_type": (value(0), "the default: every task_type (the fixture's are small)"),
                               "measure": (value(0), "the default (true)")}),
    "fb_switch_model": dict(role="superuser", txn=True, args={"model": MODEL, "force": "false"},
                            select="SELECT previous_model = active_model, caught_up FROM {call}",
                            nulls={"model": (rows([(True, 0)], "the already-active row"), NULL_MODEL),
                                   "force": (rows([(True, 0)], "the already-active row (force unused)"),
                                             "the model is already active")}),
}


# ---------------------------------------------------------------------------------------------------------------
# CASES: explicit cases
# ---------------------------------------------------------------------------------------------------------------


class Copy:
    """COPY ... FROM STDIN with these rows (psycopg write_row)."""

    def __init__(self, statement, rows):
        self.statement, self.rows = statement, rows


def case(name, cat, sql, expect, role="reader", txn=False, setup=(), teardown=(), fresh=False, cancel_after=None,
         after=(), note=None):
    return dict(name=name, cat=cat, sql=sql, expect=expect, role=role, txn=txn, setup=list(setup),
                teardown=list(teardown), fresh=fresh, cancel_after=cancel_after, after=list(after), note=note)


def ingest(task_type="'matrix_ingest'", wrong="''", correction="'Matrix correction.'", lesson="'Matrix lesson.'",
           source="'matrix'"):
    return f"SELECT action FROM fb_ingest({task_type}, {wrong}, {correction}, {lesson}, {source})"


def insert(lesson, correction="'Matrix correction.'", task_type="'matrix_ingest'"):
    return f"INSERT INTO feedback_notes (task_type, correction, lesson) VALUES ({task_type}, {correction}, {lesson})"


DIMS = "SELECT vector_dims(fb_embed({}))"
BATCH = ("SELECT cardinality(r), (SELECT count(*)::int FROM unnest(r) e WHERE vector_dims(e) = 384) "
         "FROM fb_embed_batch({}) AS r")
RERANK = ("SELECT cardinality(r), (SELECT count(*)::int FROM unnest(r) s WHERE s IS NOT NULL) "
          "FROM fb_rerank({}) AS r")
E384 = value(384)
NOTHING_STORED = ("SELECT count(*) FROM feedback_notes WHERE task_type = 'matrix_cancel'", 0)

CASES = []
add = CASES.append

# -- blank, whitespace-only and control-character text; NUL ---------------------------------------------------
for label, lit in [("empty", "''"), ("whitespace", BLANK), ("control_chars", CONTROL)]:
    add(case(f"embed_{label}", "text", DIMS.format(lit), E384))
    add(case(f"embed_query_{label}", "text", f"SELECT vector_dims(fb_embed_query({lit}))", E384))
    add(case(f"count_tokens_{label}", "text", f"SELECT fb_count_tokens({lit})", value(0)))
    add(case(f"redact_{label}_unchanged", "text", f"SELECT fb_redact({lit}) = {lit}", TRUE))
    add(case(f"retrieve_{label}_query", "text", f"SELECT id FROM fb_retrieve({lit}, {TTL})", NO_ROWS,
             note=DEBATE_BLANK_QUERY))
    add(case(f"retrieve_{label}_task_type", "text", f"SELECT id FROM fb_retrieve({QL}, {lit})", Err("22023")))
    add(case(f"ingest_{label}_lesson", "text", ingest(lesson=lit), Err("22023"), role="writer", txn=True))
add(case("screen_empty", "text", "SELECT fb_screen('')::text", value("[]")))
add(case("screen_whitespace", "text", f"SELECT fb_screen({BLANK})::text", value("[]")))
add(case("embed_batch_blank_elements", "text", BATCH.format(f"ARRAY['', {BLANK}, {CONTROL}]"), rows([(3, 3)])))
add(case("embed_batch_empty_array", "text", BATCH.format("'{}'::text[]"), rows([(0, 0)])))
add(case("rerank_empty_query", "text", RERANK.format("'', ARRAY['Bind the parameter.']"), rows([(1, 1)])))
add(case("rerank_blank_passages", "text", RERANK.format(f"{QL}, ARRAY['', {BLANK}, {CONTROL}]"), rows([(3, 3)])))
add(case("rerank_empty_array", "text", RERANK.format(f"{QL}, '{{}}'::text[]"), rows([(0, 0)])))
add(case("content_hash_normalises_whitespace", "text",
         r"SELECT fb_content_hash(E'  Perf_Review\n', E'\tAvoid  N+1 queries. ', 'Use a join.') = "
         "fb_content_hash('perf_review', 'Avoid N+1 queries.', 'Use a join.')", TRUE))
add(case("content_hash_normalises_control_chars", "text",
         r"SELECT fb_content_hash(E'perf_review\x01', E'\x02Avoid N+1 queries.', 'Use a join.') = "
         "fb_content_hash('perf_review', 'Avoid N+1 queries.', 'Use a join.')", TRUE))
add(case("content_hash_blank_fields", "text", "SELECT fb_content_hash('', '', '')", HEX64,
         note="debatable: a pure function; the write path refuses such a note, the hash itself is defined"))
add(case("retrieve_task_type_normalised", "text",
         rf"SELECT rank, id, scored_by FROM fb_retrieve({QL}, E'  SQL_Injection_Scan\n', {PROBE_ARGS})", PROBE))
add(case("find_duplicate_blank_task_type", "text", f"SELECT id FROM fb_find_duplicate({BLANK}, 'x')", Err("22023")))
add(case("find_duplicate_blank_lesson", "text", f"SELECT id FROM fb_find_duplicate({TTL}, {BLANK})", NO_ROWS,
         note="documented: a lookup of nothing finds nothing (storing a blank lesson is refused)"))
add(case("build_prompt_empty_query", "text", f"SELECT fb_build_prompt('', {TTL})", NO_NOTES_PROMPT,
         note=DEBATE_BLANK_QUERY))
add(case("build_prompt_blank_task_type", "text", f"SELECT fb_build_prompt({QL}, {BLANK})", Err("22023")))
add(case("ingest_blank_task_type", "text", ingest(task_type=BLANK), Err("22023"), role="writer", txn=True))
add(case("ingest_control_chars_correction", "text", ingest(correction=CONTROL), Err("22023"), role="writer",
         txn=True))
add(case("ingest_empty_wrong_answer", "text", ingest(wrong="''"), value("inserted"), role="writer", txn=True))
add(case("ingest_blank_source", "text", ingest(source=BLANK), value("inserted"), role="writer", txn=True))
add(case("insert_blank_lesson", "text", insert(BLANK), Err("22023"), role="writer"))
add(case("copy_blank_correction", "text",
         Copy("COPY feedback_notes (task_type, correction, lesson) FROM STDIN",
              [("matrix_ingest", " \t ", "Matrix lesson copied.")]), Err("22023"), role="writer"))
add(case("reject_blank_reason", "text", f"SELECT fb_reject(<<pending_id>>, {BLANK})", Err("22023"),
         role="reviewer", txn=True))
add(case("purge_blank_reason", "text", f"SELECT fb_purge(<<spare_id>>, {BLANK})", Err("22023"), role="reviewer",
         txn=True))
add(case("deprecate_stale_blank_task_type", "text", f"SELECT fb_deprecate_stale('1000 years', {BLANK})",
         Err("22023"), role="reviewer", txn=True))
# NUL cannot be in a text value: Postgres refuses it before pg_feedback sees it (no pg_feedback HINT).
add(case("nul_in_escape_string", "text", r"SELECT fb_embed(E'a\000b')", Err("22021", hint=False)))
add(case("nul_via_chr", "text", "SELECT fb_embed('a' || chr(0))", Err("54000", hint=False)))

# -- invalid UTF-8 via convert_from: Postgres raises 22021 (documented outcome; Postgres' error, no HINT) ---------
add(case("utf8_invalid_embed", "utf8", DIMS.format(BAD_UTF8), Err("22021", hint=False)))
add(case("utf8_invalid_retrieve_query", "utf8", f"SELECT id FROM fb_retrieve({BAD_UTF8}, {TTL})",
         Err("22021", hint=False)))
add(case("utf8_invalid_rerank_passage", "utf8", RERANK.format(f"{QL}, ARRAY[{BAD_UTF8}]"), Err("22021", hint=False)))
add(case("utf8_invalid_redact", "utf8", f"SELECT fb_redact({BAD_UTF8})", Err("22021", hint=False)))
add(case("utf8_invalid_ingest_lesson", "utf8", ingest(lesson=BAD_UTF8), Err("22021", hint=False), role="writer",
         txn=True))
add(case("utf8_invalid_insert", "utf8", insert(r"convert_from('\xc328'::bytea, 'UTF8')"), Err("22021", hint=False),
         role="writer"))

# -- 1 MB and 100 MB text (pg_feedback.max_input_bytes, 64 kB) ---------------------------------------------------
for label, big in [("1mb", MB1), ("100mb", MB100)]:
    add(case(f"embed_{label}", "size", DIMS.format(big), Err("54000")))
    add(case(f"rerank_passage_{label}", "size", RERANK.format(f"{QL}, ARRAY[{big}]"), Err("54000")))
    add(case(f"redact_{label}", "size", f"SELECT length(fb_redact({big}))", Err("54000")))
    add(case(f"screen_{label}", "size", f"SELECT fb_screen({big})::text", Err("54000")))
    add(case(f"ingest_lesson_{label}", "size", ingest(lesson=big), Err("54000"), role="writer", txn=True))
    add(case(f"insert_lesson_{label}", "size", insert(big), Err("54000"), role="writer"))
    add(case(f"content_hash_{label}", "size", f"SELECT fb_content_hash('perf_review', {big}, 'c')", HEX64,
             note="pure function: hashes any size (documented as what happens; nothing is embedded)"))
add(case("embed_query_1mb", "size", f"SELECT vector_dims(fb_embed_query({MB1}))", Err("54000")))
add(case("embed_batch_element_1mb", "size", BATCH.format(f"ARRAY['ok', {MB1}]"), Err("54000")))
add(case("rerank_query_1mb", "size", RERANK.format(f"{MB1}, ARRAY['p']"), Err("54000")))
add(case("count_tokens_1mb", "size", f"SELECT fb_count_tokens({MB1})", Err("54000")))
add(case("retrieve_query_1mb", "size", f"SELECT id FROM fb_retrieve({MB1}, {TTL})", Err("54000")))
add(case("retrieve_task_type_1mb", "size", f"SELECT id FROM fb_retrieve({QL}, {MB1})", NO_ROWS,
         note="an unknown task_type (nothing embeds or screens it): no rows"))
add(case("build_prompt_query_1mb", "size", f"SELECT fb_build_prompt({MB1}, {TTL})", Err("54000")))
add(case("build_prompt_instructions_1mb", "size", f"SELECT fb_build_prompt({QL}, {TTL}, {MB1})", Err("54000"),
         note="instructions are not tokenized, but they are copied into the prompt: capped like every text"))
add(case("compare_notes_lesson_1mb", "size", f"SELECT fb_compare_notes({MB1}, 'b')", Err("54000")))
add(case("compare_notes_reversed", "text",
         "SELECT fb_compare_notes('Prefer tabs over spaces in Makefiles.', 'Prefer spaces over tabs in Makefiles.')"
         "->>'verdict'", rows([("revision",)], "revision")))
add(case("find_duplicate_lesson_1mb", "size", f"SELECT id FROM fb_find_duplicate({TTL}, {MB1})", Err("54000")))
add(case("ingest_correction_1mb", "size", ingest(correction=MB1), Err("54000"), role="writer", txn=True))
add(case("ingest_wrong_answer_1mb", "size", ingest(wrong=MB1), Err("54000"), role="writer", txn=True))
add(case("ingest_source_1mb", "size", ingest(source=MB1), Err("54000"), role="writer", txn=True))
add(case("ingest_task_type_1mb", "size", ingest(task_type=MB1), Err("54000"), role="writer", txn=True))
add(case("copy_correction_1mb", "size",
         Copy("COPY feedback_notes (task_type, correction, lesson) FROM STDIN",
              [("matrix_ingest", "x " * 524288, "Matrix lesson copied.")]), Err("54000"), role="writer"))
add(case("document_text_1mb", "size", f"SELECT length(fb_document_text('perf_review', {MB1})) > 1048576", TRUE,
         note="pure function: builds the text (documented as what happens; embedding it is refused)"))
add(case("reject_reason_1mb", "size", f"SELECT fb_reject(<<pending_id>>, {MB1})", Err("54000"), role="reviewer",
         txn=True))
add(case("deprecate_reason_1mb", "size", f"SELECT fb_deprecate(<<spare_id>>, {MB1})", Err("54000"),
         role="reviewer", txn=True))

# -- 10,000-element arrays ----------------------------------------------------------------------------------------
TENK = "ARRAY[10000]"
NOTE_10K = ("ROW('matrix_10k', '', 'Matrix correction repeated.', 'Matrix lesson repeated ten thousand times.', "
            "NULL)::fb_note_input")
add(case("embed_batch_10k", "array", BATCH.format(f"array_fill('x'::text, {TENK})"), rows([(10000, 10000)])))
add(case("embed_batch_10k_nulls", "array", BATCH.format(f"array_fill(NULL::text, {TENK})"), rows([(10000, 0)])))
add(case("embed_batch_10k_one_oversized", "array", BATCH.format(f"array_fill('x'::text, ARRAY[9999]) || {MB1}"),
         Err("54000")))
add(case("rerank_10k", "array", RERANK.format(f"'q', array_fill('p'::text, {TENK})"), rows([(10000, 10000)])))
add(case("rerank_10k_nulls", "array", RERANK.format(f"{QL}, array_fill(NULL::text, {TENK})"), rows([(10000, 0)])))
add(case("ingest_batch_10k_same_note", "array",
         f"SELECT action, count(*)::int FROM fb_ingest_batch(array_fill({NOTE_10K}, {TENK})) GROUP BY 1 ORDER BY 1",
         rows([("inserted", 1), ("updated", 9999)], "1 inserted, 9999 counted reports (updated)"),
         role="writer", txn=True))
add(case("ingest_batch_10k_one_blank", "array",
         f"SELECT count(*) FROM fb_ingest_batch(array_fill({NOTE_10K}, ARRAY[9999]) || "
         "ROW('matrix_10k', '', 'Matrix correction.', '   ', NULL)::fb_note_input)", Err("22023"), role="writer",
         after=[("SELECT count(*) FROM feedback_notes WHERE task_type = 'matrix_10k'", 0)]))
add(case("ingest_batch_null_element", "array", "SELECT count(*) FROM fb_ingest_batch(ARRAY[NULL::fb_note_input])",
         Err("22023"), role="writer", txn=True))
add(case("ingest_batch_contexts_mismatch", "array",
         "SELECT count(*) FROM fb_ingest_batch(ARRAY[ROW('matrix_ingest', '', 'Matrix correction: one context each.', "
         "'Matrix lesson: contexts pair with notes.', 'matrix')::fb_note_input], NULL, ARRAY['a', 'b'])",
         Err("22023"), role="writer", txn=True))
add(case("embed_batch_null_element", "array", BATCH.format("ARRAY[NULL, 'x']"), rows([(2, 1)])))
add(case("rerank_null_element", "array", RERANK.format(f"{QL}, ARRAY[NULL, 'Bind it.']"), rows([(2, 1)])))

# -- limits -------------------------------------------------------------------------------------------------------
R = "SELECT id FROM fb_retrieve({})"
for label, args in [("candidate_k_0", "candidate_k => 0"), ("candidate_k_negative", "candidate_k => -1"),
                    ("candidate_k_1001", "candidate_k => 1001"), ("candidate_k_int_max", "candidate_k => 2147483647"),
                    ("final_k_0", "final_k => 0"), ("final_k_negative", "final_k => -1"),
                    ("final_k_above_candidate_k", "candidate_k => 20, final_k => 21")]:
    add(case(f"retrieve_{label}", "limits", R.format(f"{QL}, {TTL}, {args}"), Err("22023")))
add(case("retrieve_candidate_k_1000", "limits",
         f"SELECT rank, id, scored_by FROM fb_retrieve({QL}, {TTL}, candidate_k => 1000, {PROBE_ARGS})", PROBE))
add(case("retrieve_final_k_1000", "limits",
         f"SELECT rank, id, scored_by FROM fb_retrieve({QL}, {TTL}, candidate_k => 1000, final_k => 1000, "
         "min_score => -100)",
         Res("every candidate, reranked, in rank order: a caller's min_score is a ranking mode",
             lambda got, ctx: len(got) > 3 and [r[0] for r in got] == list(range(1, len(got) + 1))
             and {r[2] for r in got} == {"cross-encoder"}),
         note="with min_score given every candidate is scored (not only rerank_max_pairs), none cut relatively"))
add(case("retrieve_min_score_unreachable", "limits", R.format(f"{QL}, {TTL}, min_score => 1000"), NO_ROWS))
for limit in ("0", "2147483647"):   # always HNSW; always exact (the setting's own maximum)
    add(case(f"retrieve_exact_scan_limit_{limit}", "limits", PROBE_SQL, PROBE,
             setup=[f"SET pg_feedback.exact_scan_limit = {limit}"], teardown=["RESET pg_feedback.exact_scan_limit"]))
for label, n in [("0", "0"), ("negative", "-1")]:
    add(case(f"build_prompt_max_tokens_{label}", "limits", f"SELECT fb_build_prompt({QL}, {TTL}, 'x', {n})",
             Err("22023")))
add(case("build_prompt_max_tokens_1", "limits", f"SELECT fb_build_prompt({QL}, {TTL}, 'x', 1)", NO_NOTES_PROMPT,
         note="no lesson fits: the block is empty"))
for label, args in [("k_0", "0"), ("k_negative", "-1"), ("k_1001", "1001")]:
    add(case(f"eval_{label}", "limits", f"SELECT count(*) FROM fb_eval({args}, false)", Err("22023"),
             role="reviewer", txn=True))
add(case("eval_split_unknown", "limits", "SELECT count(*) FROM fb_eval(3, false, NULL, 'nope')", Err("22023"),
         role="reviewer", txn=True))
for label, args in [("split_unknown", "split => 'nope'"), ("lambda_negative", "lambda => -1"),
                    ("tolerance_negative", "tolerance => -1"), ("min_questions_negative", "min_questions => -1"),
                    ("code_segments_negative", "code_segments => -1"), ("code_segments_33", "code_segments => 33")]:
    add(case(f"calibrate_{label}", "limits", f"SELECT count(*) FROM fb_calibrate({args}, apply => false)",
            Err("22023"), role="reviewer", txn=True))
add(case("eval_ann_sample_negative", "limits", "SELECT count(*) FROM fb_eval_ann(-1, 5)", Err("22023"),
         role="reviewer", note="README: out-of-range sizes are 22023 with a HINT (sample is not listed there)"))
add(case("eval_ann_sample_0", "limits", "SELECT task_type, queries FROM fb_eval_ann(0, 5)", Err("22023"),
         role="reviewer"))
add(case("eval_ann_k_0", "limits", "SELECT count(*) FROM fb_eval_ann(5, 0)", Err("22023"), role="reviewer"))
add(case("eval_ann_k_1001", "limits", "SELECT count(*) FROM fb_eval_ann(5, 1001)", Err("22023"), role="reviewer"))
add(case("reembed_batch_size_0", "limits", "CALL fb_reembed('bge-small-en-v1.5', 0)", Err("22023"),
         role="superuser"))
add(case("reembed_batch_size_10001", "limits", "CALL fb_reembed('bge-small-en-v1.5', 10001)", Err("22023"),
         role="superuser"))
add(case("deprecate_stale_negative_interval", "limits", "SELECT fb_deprecate_stale(interval '-1 day')",
         Err("22023"), role="reviewer", txn=True))
add(case("deprecate_stale_zero_interval", "limits", "SELECT fb_deprecate_stale(interval '0')", Err("22023"),
         role="reviewer", txn=True))
add(case("judge_unknown_retrieval", "limits", "SELECT fb_judge(-1, <<judged_note_id>>, true)", Err("P0002"),
         role="reviewer", txn=True))
add(case("judge_note_not_returned", "limits", "SELECT fb_judge(<<retrieval_id>>, -1, true)", Err("22023"),
         role="reviewer", txn=True))
for fn in ("approve", "deprecate", "restore"):
    add(case(f"{fn}_unknown_id", "limits", f"SELECT fb_{fn}(-1)", Err("P0002"), role="reviewer", txn=True))
add(case("purge_merged_unknown_hash", "limits", "SELECT fb_purge_merged('nope', 'leaked')", Err("P0002"),
         role="reviewer", txn=True))

# -- unknown task_type: documented, no rows -----------------------------------------------------------------------
add(case("unknown_task_type_retrieve", "unknown_task_type", f"SELECT id FROM fb_retrieve({QL}, 'no_such_task')",
         NO_ROWS))
add(case("unknown_task_type_retrieve_cosine", "unknown_task_type",
         f"SELECT id FROM fb_retrieve({QL}, 'no_such_task', rerank => false)", NO_ROWS))
add(case("unknown_task_type_build_prompt", "unknown_task_type", f"SELECT fb_build_prompt({QL}, 'no_such_task')",
         NO_NOTES_PROMPT))
add(case("unknown_task_type_find_duplicate", "unknown_task_type",
         "SELECT id FROM fb_find_duplicate('no_such_task', 'Bind it.')", NO_ROWS))
add(case("unknown_task_type_deprecate_stale", "unknown_task_type",
         "SELECT fb_deprecate_stale(interval '1 second', 'no_such_task')", value(0), role="reviewer", txn=True))

# -- unknown / wrong model names ----------------------------------------------------------------------------------
RM = "SELECT id FROM fb_retrieve(" + QL + ", " + TTL + ", model => {})"
add(case("retrieve_model_unknown", "model_name", RM.format("'nope'"), Err("58P01")))
add(case("retrieve_model_path", "model_name", RM.format("'../../etc/passwd'"), Err("22023")))
add(case("retrieve_model_bad_key", "model_name", RM.format("'nope@abc'"), Err("22023")))
add(case("retrieve_model_cross_encoder", "model_name", RM.format("'ms-marco-MiniLM-L-12-v2'"), Err("22023")))
add(case("retrieve_model_not_reembedded", "model_name", RM.format("'all-MiniLM-L6-v2'"), Err("55000"),
         note="debatable: an installed model no slot holds has no vectors; today zero rows, silently, where "
              "fb_switch_model says 'not re-embedded yet' (55000)"))
add(case("embed_batch_model_unknown", "model_name", BATCH.format("ARRAY['x'], false, 'nope'"), Err("58P01")))
add(case("embed_batch_model_cross_encoder", "model_name", BATCH.format("ARRAY['x'], false, 'ms-marco-MiniLM-L-12-v2'"),
         Err("22023")))
add(case("eval_model_unknown", "model_name", "SELECT count(*) FROM fb_eval(3, false, 'nope')", Err("58P01"),
         role="reviewer", txn=True))
add(case("switch_model_unknown", "model_name", "SELECT count(*) FROM fb_switch_model('nope')", Err("58P01"),
         role="superuser", txn=True))
add(case("switch_model_not_reembedded", "model_name", "SELECT count(*) FROM fb_switch_model('all-MiniLM-L6-v2')",
         Err("55000"), role="superuser", txn=True))
add(case("reembed_unknown", "model_name", "CALL fb_reembed('nope')", Err("58P01"), role="superuser"))
add(case("reembed_cross_encoder", "model_name", "CALL fb_reembed('ms-marco-MiniLM-L-12-v2')", Err("22023"),
         role="superuser"))


def with_setting(name, value_sql):
    return dict(setup=[f"SET {name} = {value_sql}"], teardown=[f"RESET {name}"])


for label, val, sql, exp, note in [
        ("rerank_model_unknown_rerank", "'nope'", RERANK.format(f"{QL}, ARRAY['p']"), Err("58P01"), None),
        ("rerank_model_unknown_retrieve", "'nope'", R.format(f"{QL}, {TTL}"), Err("58P01"), None),
        ("rerank_model_wrong_kind", "'bge-small-en-v1.5'", RERANK.format(f"{QL}, ARRAY['p']"), Err("22023"), None),
        ("rerank_model_none_rerank", "''", RERANK.format(f"{QL}, ARRAY['p']"), Err("55000"),
         "debatable: '' is documented as 'no cross-encoder', not an invalid name; fb_calibrate answers 55000 "
         "'no cross-encoder is configured'"),
        ("rerank_model_none_retrieve_cosine", "''",
         f"SELECT DISTINCT scored_by FROM fb_retrieve({QL}, {TTL}, final_k => 3, min_score => -1)",
         value("cosine"), None)]:
    add(case(label, "model_name", sql, exp, role="superuser", note=note,
             **with_setting("pg_feedback.rerank_model", val)))
add(case("embedding_model_unknown_count_tokens", "model_name", "SELECT fb_count_tokens('x')", Err("58P01"),
         role="superuser", **with_setting("pg_feedback.embedding_model", "'nope'")))
add(case("embedding_model_unknown_embed_uses_pinned", "model_name", DIMS.format("'x'"), E384, role="superuser",
         note="documented: the database's pinned model embeds; the setting only chooses the first pin",
         **with_setting("pg_feedback.embedding_model", "'nope'")))
add(case("embedding_model_path_count_tokens", "model_name", "SELECT fb_count_tokens('x')", Err("22023"),
         role="superuser", **with_setting("pg_feedback.embedding_model", "'../../etc'")))

# -- broken model files: a copy of the model directory (built by matrix.py), SET pg_feedback.model_dir -------------
MODEL_DIRS = {
    # name: (what is broken, how it is broken) -- matrix.py builds each under a temp dir
    "no_dir": "a model_dir that does not exist",
    "no_bge": "bge-small-en-v1.5's folder missing",
    "onnx_missing": "bge's model.onnx missing",
    "tokenizer_missing": "bge's tokenizer.json missing",
    "onnx_unreadable": "bge's model.onnx mode 000 (the server's OS user cannot read it)",
    "folder_unreadable": "bge's folder mode 000",
    "onnx_checksum": "one byte of bge's model.onnx changed (manifest pins the original)",
    "tokenizer_checksum": "one byte of bge's tokenizer.json changed",
    "onnx_truncated": "bge's model.onnx cut to a third (manifest pins the original)",
    "onnx_truncated_repinned": "bge's model.onnx cut to a third, manifest sha256 updated to match",
    "manifest_invalid": "bge's manifest.json not JSON",
    "onnx_swapped": "bge's model.onnx replaced by all-MiniLM-L6-v2's (a valid graph), manifest sha256 updated",
    "ce_checksum": "one byte of the cross-encoder's model.onnx changed",
    "ce_missing": "the cross-encoder's folder missing",
}
EMBED_X = DIMS.format("'model files'")
for label, d, sql, exp, note in [
        ("dir_missing", "no_dir", EMBED_X, Err("58P01"), None),
        ("folder_missing", "no_bge", EMBED_X, Err("58P01"), None),
        ("onnx_missing", "onnx_missing", EMBED_X, Err("58030"),
         "documented: a file the manifest lists is missing: the install is damaged (io_error, reinstall)"),
        ("tokenizer_missing", "tokenizer_missing", EMBED_X, Err("58030"), "as onnx_missing"),
        ("onnx_unreadable", "onnx_unreadable", EMBED_X, Err("58030"), None),
        ("folder_unreadable", "folder_unreadable", EMBED_X, Err("58030"),
         "debatable: permission denied on the folder is an I/O error, not 'not installed'"),
        ("onnx_checksum", "onnx_checksum", EMBED_X, Err("XX001"), None),
        ("tokenizer_checksum", "tokenizer_checksum", EMBED_X, Err("XX001"), None),
        ("tokenizer_checksum_count_tokens", "tokenizer_checksum", "SELECT fb_count_tokens('x')", Err("XX001"), None),
        ("onnx_truncated", "onnx_truncated", EMBED_X, Err("XX001"), None),
        ("onnx_truncated_repinned", "onnx_truncated_repinned", EMBED_X, Err("55000"),
         "documented: the files under the pinned name are not the pinned weights"),
        ("onnx_truncated_repinned_by_name", "onnx_truncated_repinned",
         BATCH.format("ARRAY['x'], false, 'bge-small-en-v1.5'"), Err("38000"),
         "debatable: an ONNX file that does not parse (checksum right) - 38000 'inference failure' or XX001"),
        ("onnx_swapped", "onnx_swapped", EMBED_X, Err("55000"),
         "documented: other weights under the pinned name: refused, never vectors of another space"),
        ("manifest_invalid", "manifest_invalid", EMBED_X, Err("F0000"), None),
        ("cross_encoder_checksum_rerank", "ce_checksum", RERANK.format(f"{QL}, ARRAY['p']"), Err("XX001"), None),
        ("cross_encoder_checksum_retrieve", "ce_checksum", R.format(f"{QL}, {TTL}"), Err("XX001"), None),
        ("cross_encoder_missing", "ce_missing", RERANK.format(f"{QL}, ARRAY['p']"), Err("58P01"), None)]:
    add(case(f"model_{label}", "model_files", sql, exp, role="superuser", fresh=True, note=note,
             **with_setting("pg_feedback.model_dir", f"'<<dir:{d}>>'")))

# The same, in the long-lived superuser session that has loaded both models already (for the probe): a session
# whose model_dir now names damaged files must not go on answering from the models it loaded from another dir.
LOADED_NOTE = ("debatable: the session loaded intact models from the default dir before; SET model_dir names other "
               "files, which fail their checksum")
add(case("model_onnx_checksum_in_loaded_session", "model_files", EMBED_X, Err("XX001"), role="superuser",
         note=LOADED_NOTE, **with_setting("pg_feedback.model_dir", "'<<dir:onnx_checksum>>'")))
add(case("model_cross_encoder_checksum_in_loaded_session", "model_files", RERANK.format(f"{QL}, ARRAY['p']"),
         Err("XX001"), role="superuser", note=LOADED_NOTE,
         **with_setting("pg_feedback.model_dir", "'<<dir:ce_checksum>>'")))

# -- ONNX Runtime library path wrong; inference mode ----------------------------------------------------------------
ORT_WRONG = "'/nonexistent/libonnxruntime.so'"
add(case("ort_path_wrong_backend_inference", "runtime", EMBED_X, Err("F0000"), role="superuser", fresh=True,
         setup=["SET pg_feedback.inference = backend", f"SET pg_feedback.onnxruntime_library = {ORT_WRONG}"],
         teardown=["RESET pg_feedback.onnxruntime_library", "RESET pg_feedback.inference"],
         note="the probe afterwards runs in the same session after RESET (the HINT says 'start a new session')"))
add(case("ort_path_not_a_runtime_backend_inference", "runtime", EMBED_X, Err("F0000"), role="superuser", fresh=True,
         setup=["SET pg_feedback.inference = backend", "SET pg_feedback.onnxruntime_library = '<<libc>>'"],
         teardown=["RESET pg_feedback.onnxruntime_library", "RESET pg_feedback.inference"]))
add(case("ort_path_wrong_auto", "runtime", EMBED_X, ByMode(worker=E384, backend=Err("F0000")), role="superuser",
         fresh=True, setup=[f"SET pg_feedback.onnxruntime_library = {ORT_WRONG}"],
         teardown=["RESET pg_feedback.onnxruntime_library"],
         note="worker mode: the worker owns ONNX Runtime (postgresql.conf), a session's setting is not used"))
add(case("inference_worker_requested", "runtime", EMBED_X, ByMode(worker=E384, backend=Err("22023")),
         role="superuser", fresh=True, **with_setting("pg_feedback.inference", "worker")))

# -- statement_timeout and pg_cancel_backend during large batches and reranks -----------------------------------------
LONG = "The reviewer explains why the query must bind its parameters. "
BIG_EMBED = ("SELECT cardinality(fb_embed_batch(array_agg(repeat(" f"'{LONG}'" ", 40) || g))) "
             "FROM generate_series(1, 1500) g")
BIG_RERANK = ("SELECT cardinality(fb_rerank('is the query injectable?', array_agg(repeat(" f"'{LONG}'" ", 40) || g))) "
              "FROM generate_series(1, 1000) g")
BIG_INSERT = ("INSERT INTO feedback_notes (task_type, correction, lesson) SELECT 'matrix_cancel', "
              "'Correction ' || g || ': index the foreign key column the join uses.', "
              "'Lesson ' || g || ': foreign keys that are joined on need an index.' FROM generate_series(1, 3000) g")
BIG_COPY = Copy("COPY feedback_notes (task_type, correction, lesson) FROM STDIN",
                [("matrix_cancel", f"Correction {g}: index the foreign key column the join uses.",
                  f"Lesson {g}: foreign keys that are joined on need an index.") for g in range(3000)])
BIG_RETRIEVE = ("SELECT count(*) FROM fb_retrieve('Must the query bind its parameters?', 'matrix_bulk', "
                "candidate_k => 1000, final_k => 10, min_score => -100)")  # 500 long candidates
RETRIEVE_SETUP = ["SET pg_feedback.selective_rerank = off", "SET pg_feedback.rerank_max_tokens = 0"]
RETRIEVE_TEARDOWN = ["RESET pg_feedback.selective_rerank", "RESET pg_feedback.rerank_max_tokens"]
for label, sql, role, setup, teardown, after in [
        ("embed_batch", BIG_EMBED, "reader", [], [], []),
        ("insert", BIG_INSERT, "writer", [], [], [NOTHING_STORED]),
        ("copy", BIG_COPY, "writer", [], [], [NOTHING_STORED]),
        ("rerank", BIG_RERANK, "reader", [], [], []),
        ("retrieve_rerank", BIG_RETRIEVE, "reader", RETRIEVE_SETUP, RETRIEVE_TEARDOWN, [])]:
    add(case(f"timeout_{label}", "cancel", sql, Err("57014", hint=False), role=role,
             setup=setup + ["SET statement_timeout = '300ms'"], teardown=["RESET statement_timeout"] + teardown,
             after=after))
    add(case(f"cancel_{label}", "cancel", sql, Err("57014", hint=False), role=role, setup=setup,
             teardown=teardown, cancel_after=0.3, after=after))

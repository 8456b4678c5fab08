-- pg_feedback: evaluating retrieval from SQL, through the same fb_retrieve users call.

CREATE TABLE feedback_golden (
    id           bigserial PRIMARY KEY,
    query        text NOT NULL,
    task_type    text NOT NULL,
    added_at     timestamptz NOT NULL DEFAULT now(),
    expected_id  bigint REFERENCES feedback_notes (id),
    split        text NOT NULL CHECK (split IN ('tune', 'test')),
    source       text NOT NULL DEFAULT 'manual' CHECK (source IN ('manual', 'judged'))
);
SELECT pg_catalog.pg_extension_config_dump('feedback_golden', '');
SELECT pg_catalog.pg_extension_config_dump('feedback_golden_id_seq', '');
COMMENT ON TABLE feedback_golden IS
    'Golden questions for fb_eval and fb_calibrate: a query and its task_type; expected_id, the note that should '
    'come back first (grade 2), or NULL; further graded notes in feedback_golden_judgments (a question with no '
    'note of grade >= 1 expects zero rows). split: tune (fb_calibrate chooses settings on it) or test (fb_eval '
    'reports on it); when not given, fixed by the query text (_fb_split_of). source: manual, or judged (fed by '
    'fb_judge from the retrieval log). Note ids never change, so an edited note stays the judged one.';
COMMENT ON COLUMN feedback_golden.split IS
    'tune or test; NULL on insert takes _fb_split_of(query), a fixed half of all texts.';

CREATE FUNCTION _fb_split_of(query text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    SET search_path = pg_catalog, pg_temp
    RETURN CASE WHEN get_byte(decode(md5(query), 'hex'), 0) % 2 = 0 THEN 'tune' ELSE 'test' END;
COMMENT ON FUNCTION _fb_split_of(text) IS
    'The split of a golden question given none: tune when the first byte of md5(query) is even, else test.';

CREATE FUNCTION _fb_golden_split() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, pg_temp
    AS $$
BEGIN
    NEW.split := coalesce(NEW.split, _fb_split_of(NEW.query));
    RETURN NEW;
END $$;
COMMENT ON FUNCTION _fb_golden_split() IS 'Internal: gives a golden question without a split its fixed one.';
CREATE TRIGGER feedback_golden_split BEFORE INSERT OR UPDATE OF split, query ON feedback_golden
    FOR EACH ROW EXECUTE FUNCTION _fb_golden_split();
-- One judged question per (query, task_type), also when reviewers judge at the same moment.
CREATE UNIQUE INDEX feedback_golden_judged_idx ON feedback_golden (query, task_type) WHERE source = 'judged';

CREATE TABLE feedback_golden_judgments (
    golden_id  bigint NOT NULL REFERENCES feedback_golden (id) ON DELETE CASCADE,
    note_id    bigint NOT NULL REFERENCES feedback_notes (id),
    grade      smallint NOT NULL CHECK (grade BETWEEN 0 AND 2),
    PRIMARY KEY (golden_id, note_id)
);
CREATE INDEX feedback_golden_judgments_note_id_idx ON feedback_golden_judgments (note_id);
SELECT pg_catalog.pg_extension_config_dump('feedback_golden_judgments', '');
COMMENT ON TABLE feedback_golden_judgments IS
    'Graded judgments of golden questions: 2 = the lesson for it, 1 = helpful, 0 = not relevant (injecting it '
    'misleads; also what an unjudged note counts as). A question''s expected_id counts as grade 2.';

CREATE FUNCTION _fb_golden_grades(p_split text DEFAULT NULL)
    RETURNS TABLE (golden_id bigint, note_ids bigint[], grades smallint[])
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, @extschema@, pg_temp
    BEGIN ATOMIC
        SELECT x.golden_id, array_agg(x.note_id ORDER BY x.note_id), array_agg(x.grade ORDER BY x.note_id)
          FROM (SELECT j.golden_id, j.note_id, max(j.grade)::smallint AS grade
                  FROM (SELECT g.id AS golden_id, g.expected_id AS note_id, 2::smallint AS grade
                          FROM feedback_golden g WHERE g.expected_id IS NOT NULL
                        UNION ALL
                        SELECT gj.golden_id, gj.note_id, gj.grade FROM feedback_golden_judgments gj) j
                  JOIN feedback_golden g ON g.id = j.golden_id
                 WHERE p_split IS NULL OR g.split = p_split
                 GROUP BY j.golden_id, j.note_id) x
         GROUP BY x.golden_id;
    END;

-- What fb_eval and fb_calibrate score. A judged question only knows the notes that were judged: "misleading"
-- alone does not make it a question no note answers.
CREATE FUNCTION _fb_golden_questions(p_split text DEFAULT NULL)
    RETURNS SETOF feedback_golden
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, @extschema@, pg_temp
    BEGIN ATOMIC
        SELECT g.* FROM feedback_golden g
         WHERE (p_split IS NULL OR g.split = p_split)
           AND (g.source = 'manual'
                OR EXISTS (SELECT 1 FROM feedback_golden_judgments j WHERE j.golden_id = g.id AND j.grade >= 1));
    END;
COMMENT ON FUNCTION _fb_golden_questions(text) IS
    'Internal: the golden questions evaluated (of a split, or all): manual ones, and judged ones with a note judged '
    'helpful.';
COMMENT ON FUNCTION _fb_golden_grades(text) IS
    'Internal: each golden question''s judged notes and grades (expected_id counts as grade 2), of one split or all.';

CREATE TABLE fb_eval_runs (
    id                 bigserial PRIMARY KEY,
    run_at             timestamptz NOT NULL DEFAULT now(),
    run_by             text NOT NULL DEFAULT session_user,
    k                  integer NOT NULL,
    embedding_model    text NOT NULL,
    scored_by          text NOT NULL,
    settings           jsonb NOT NULL,
    questions          integer NOT NULL,
    recall_at_k        real,
    mrr                real,
    ndcg_at_k          real,
    no_answer_correct  real,
    by_task_type       jsonb NOT NULL,
    split              text,
    "precision"        real,
    misled_share       real,
    mean_injected      real
);
SELECT pg_catalog.pg_extension_config_dump('fb_eval_runs', '');
SELECT pg_catalog.pg_extension_config_dump('fb_eval_runs_id_seq', '');
COMMENT ON TABLE fb_eval_runs IS
    'One row per fb_eval run: when, which models and pg_feedback settings, which split (NULL: all questions), the '
    'overall numbers and the per-task_type rows. fb_eval_history compares each run with the previous one.';

CREATE FUNCTION fb_eval(k integer DEFAULT 3, record boolean DEFAULT true, model text DEFAULT NULL,
                        split text DEFAULT NULL)
    RETURNS TABLE (task_type text, questions integer, answerable integer, recall_at_k real, mrr real,
                   ndcg_at_k real, no_answer integer, no_answer_correct real, "precision" real, misled_share real,
                   mean_injected real, embedding_model text, scored_by text, kind text, applicable_injected real,
                   injected_apply real)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    SET pg_feedback.log_retrievals = off
    AS $$
#variable_conflict use_column
DECLARE
    key text := _fb_resolve_model(model);
    scorer text := CASE WHEN _fb_setting('pg_feedback.rerank')::boolean AND fb_rerank_model() <> ''
                        THEN 'cross-encoder' ELSE 'cosine' END;
    result jsonb;
BEGIN
    IF k IS NULL OR k < 1 OR k > 1000 THEN
        RAISE EXCEPTION 'k must be between 1 and 1000, not %', k
            USING ERRCODE = 'invalid_parameter_value', HINT = 'k is the cut-off of recall@k and nDCG@k, e.g. 3.';
    END IF;
    IF split IS NOT NULL AND split NOT IN ('tune', 'test') THEN
        RAISE EXCEPTION 'unknown split "%"', split
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Use tune, test, or NULL for every golden question.';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM _fb_golden_questions(fb_eval.split)) THEN
        RAISE EXCEPTION 'feedback_golden has no % questions', coalesce(split, 'golden')
            USING ERRCODE = 'no_data_found',
                  HINT = 'Insert golden questions: (query, task_type, expected_id), expected_id NULL when no note '
                         'should come back; grade further notes in feedback_golden_judgments.';
    END IF;

    WITH answers AS MATERIALIZED (   -- each question is retrieved once
        SELECT g.id, g.task_type, _fb_input_kind(g.query) AS kind,
               (SELECT array_agg(r.id ORDER BY r.rank)
                  FROM fb_retrieve(g.query, g.task_type, greatest(20, k), model => key) r) AS got
          FROM _fb_golden_questions(fb_eval.split) g
    ), scored AS (
        SELECT a.kind, _fb_task_type(a.task_type) AS task_type, m.*,
               -- Every note that applies (grade 2) and how many of them were injected, wherever they ranked.
               (SELECT count(*) FROM unnest(gr.grades) x WHERE x = 2) AS applicable,
               (SELECT count(*) FROM unnest(gr.note_ids, gr.grades) x(id, grade)
                 WHERE x.grade = 2 AND x.id = ANY (a.got)) AS applied,
               coalesce(cardinality(a.got), 0) AS returned
          FROM answers a
          LEFT JOIN _fb_golden_grades(fb_eval.split) gr ON gr.golden_id = a.id
         CROSS JOIN LATERAL _fb_question_metrics(a.got, gr.note_ids, gr.grades, k) m
    ), rows AS (
        SELECT coalesce(s.kind, '(all)') AS kind, coalesce(s.task_type, '(all)') AS task_type,
               count(*)::integer AS questions,
               count(*) FILTER (WHERE s.answerable)::integer AS answerable,
               (avg(s.hit::integer) FILTER (WHERE s.answerable))::real AS recall_at_k,
               (avg(s.reciprocal_rank) FILTER (WHERE s.answerable))::real AS mrr,
               (avg(s.ndcg) FILTER (WHERE s.answerable))::real AS ndcg_at_k,
               count(*) FILTER (WHERE NOT s.answerable)::integer AS no_answer,
               (avg((s.injected = 0)::integer) FILTER (WHERE NOT s.answerable))::real AS no_answer_correct,
               (sum(s.relevant)::double precision / nullif(sum(s.injected), 0))::real AS "precision",
               (avg((s.relevant < s.injected)::integer) FILTER (WHERE s.answerable))::real AS misled_share,
               (avg(s.injected) FILTER (WHERE s.answerable))::real AS mean_injected,
               (sum(s.applied)::double precision / nullif(sum(s.applicable), 0))::real AS applicable_injected,
               (sum(s.applied)::double precision / nullif(sum(s.returned), 0))::real AS injected_apply,
               grouping(s.kind, s.task_type) AS overall
          FROM scored s
         GROUP BY GROUPING SETS ((s.kind, s.task_type), (s.kind), ())
    )
    SELECT jsonb_agg(to_jsonb(r) - 'overall' ORDER BY r.overall = 3, r.kind, r.overall, r.task_type) INTO result
      FROM rows r;

    IF record THEN
        INSERT INTO fb_eval_runs (k, embedding_model, scored_by, settings, questions, recall_at_k, mrr, ndcg_at_k,
                                  no_answer_correct, by_task_type, split, "precision", misled_share, mean_injected)
        SELECT k, key, scorer,
               (SELECT jsonb_object_agg(name, setting) FROM pg_settings WHERE name LIKE 'pg_feedback.%')
                   || jsonb_build_object('feedback_retrieval_settings',
                                         (SELECT coalesce(jsonb_agg(to_jsonb(r) - 'calibration'), '[]')
                                            FROM feedback_retrieval_settings r)),
               (o ->> 'questions')::integer, (o ->> 'recall_at_k')::real, (o ->> 'mrr')::real,
               (o ->> 'ndcg_at_k')::real, (o ->> 'no_answer_correct')::real,
               (SELECT jsonb_agg(e) FROM jsonb_array_elements(result) e WHERE e ->> 'kind' <> '(all)'),
               fb_eval.split, (o ->> 'precision')::real, (o ->> 'misled_share')::real,
               (o ->> 'mean_injected')::real
          FROM jsonb_array_elements(result) o
         WHERE o ->> 'kind' = '(all)';
    END IF;

    RETURN QUERY
    SELECT x.task_type, x.questions, x.answerable, x.recall_at_k, x.mrr, x.ndcg_at_k, x.no_answer,
           x.no_answer_correct, x."precision", x.misled_share, x.mean_injected, key, scorer, x.kind,
           x.applicable_injected, x.injected_apply
      FROM jsonb_to_recordset(result) AS x(kind text, task_type text, questions integer, answerable integer,
                                           recall_at_k real, mrr real, ndcg_at_k real, no_answer integer,
                                           no_answer_correct real, "precision" real, misled_share real,
                                           mean_injected real, applicable_injected real, injected_apply real);
END $$;

COMMENT ON FUNCTION fb_eval(integer, boolean, text, text) IS
    'Scores retrieval on feedback_golden through fb_retrieve (same settings users get), on one split (tune, test) '
    'or all questions (split NULL): per kind of input (prose questions, code: _fb_input_kind) and task_type, per '
    'kind (task_type "(all)") and overall (kind and task_type "(all)", last row); applicable_injected: share of the notes that '
    'apply (grade 2) that were injected, injected_apply: share of injected notes that apply; over questions that expect a '
    'note: recall@k (a note of the question''s top grade in the first k), MRR, graded nDCG@k, misled_share (share '
    'whose injected notes include one judged irrelevant) and mean_injected; over questions that expect none: the '
    'share that got zero rows; over all: precision (share of injected notes judged >= 1). Records the run in '
    'fb_eval_runs unless record => false. model => a model in the standby slot scores its vectors (fb_reembed) '
    'before fb_switch_model makes it the active one. The retrieval log is off while it runs.';

CREATE FUNCTION fb_calibrate(split text DEFAULT 'tune', lambda real DEFAULT 0.5, per_task_type boolean DEFAULT true,
                             min_questions integer DEFAULT 50, tolerance real DEFAULT 0,
                             apply boolean DEFAULT true, code_segments integer DEFAULT 0)
    RETURNS TABLE (task_type text, questions integer, rerank boolean, rerank_floor real, relative_cut real,
                   max_notes integer, cosine_floor real, cosine_relative_cut real, cosine_max_notes integer,
                   recall_at_3 real, "precision" real, no_answer_correct real, utility real)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    SET pg_feedback.log_retrievals = off
    AS $$
#variable_conflict use_column
DECLARE
    key text := _fb_resolve_model(NULL);
    cross_encoder text := fb_rerank_model();
    data jsonb;
    code_data jsonb;
    decision jsonb;
    segmenting jsonb := jsonb_build_object('max_segments', code_segments);
    result jsonb;
    sel jsonb;
BEGIN
    IF split IS NOT NULL AND split NOT IN ('tune', 'test') THEN
        RAISE EXCEPTION 'unknown split "%"', split
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Calibrate on tune (the default), test, or NULL (all).';
    END IF;
    IF lambda IS NULL OR lambda < 0 OR tolerance IS NULL OR tolerance < 0 OR min_questions IS NULL
       OR min_questions < 0 OR per_task_type IS NULL THEN
        RAISE EXCEPTION 'lambda, tolerance, min_questions and per_task_type must be given, and the numbers not negative'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'lambda: cost of one irrelevant note injected, in found lessons (e.g. 0.5); tolerance: '
                         'utility a cheaper rerank may lose (0); min_questions: questions a task_type needs for '
                         'settings of its own (50).';
    END IF;
    IF code_segments IS NULL OR code_segments NOT BETWEEN 0 AND 32 THEN
        RAISE EXCEPTION 'code_segments must be between 0 and 32, not %', code_segments
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'code_segments: windows of lines embedded beside each code input (0, the default: the '
                         'whole input alone).';
    END IF;
    IF cross_encoder = '' THEN
        RAISE EXCEPTION 'no cross-encoder is configured'
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'Set pg_feedback.rerank_model.';
    END IF;
    -- Every question's first-stage candidates with their cosine similarity and full cross-encoder score (every
    -- candidate, so that the sweep can simulate any selective policy), and its grades.
    WITH golden AS (
        SELECT g.id, g.query, _fb_task_type(g.task_type) AS task_type
          FROM _fb_golden_questions(fb_calibrate.split) g
         WHERE _fb_input_kind(g.query) = 'prose'
    ), candidates AS MATERIALIZED (
        SELECT g.id, g.query, g.task_type, c.ids, c.sims, c.passages
          FROM golden g
         CROSS JOIN LATERAL (
            SELECT array_agg(f.id ORDER BY f.n) AS ids, array_agg(f.similarity ORDER BY f.n) AS sims,
                   array_agg(f.lesson || ' ' || f.correction ORDER BY f.n) AS passages
              FROM _fb_first_stage(g.query, (fb_embed_batch(ARRAY[g.query], true, key))[1], g.task_type, 20, key)
                   WITH ORDINALITY AS f(id, lesson, correction, similarity, created_at, fused, source, n)) c
    ), scored AS MATERIALIZED (   -- not inlined: each question is reranked once
        SELECT c.*, CASE WHEN c.ids IS NOT NULL THEN fb_rerank(c.query, c.passages) END AS ce
          FROM candidates c
    )
    SELECT jsonb_agg(jsonb_build_object(
               'group', s.task_type,
               'graded', coalesce((SELECT jsonb_agg(jsonb_build_array(gr.note_ids[i], gr.grades[i]))
                                     FROM generate_subscripts(gr.note_ids, 1) i), '[]'),
               'candidates', coalesce((SELECT jsonb_agg(jsonb_build_object('id', s.ids[i], 'cosine', s.sims[i],
                                                                           'score', s.ce[i]) ORDER BY i)
                                         FROM generate_subscripts(s.ids, 1) i), '[]')))
      INTO data
      FROM scored s
      LEFT JOIN _fb_golden_grades(fb_calibrate.split) gr ON gr.golden_id = s.id;
    -- Code inputs: every candidate with what the learned decision reads, and the input's grades.
    SELECT jsonb_agg(jsonb_build_object(
               'query', g.query, 'vector', v.vectors[1]::real[], 'n_segments', cardinality(v.segs),
               'graded', coalesce((SELECT jsonb_agg(jsonb_build_array(gr.note_ids[i], gr.grades[i]))
                                     FROM generate_subscripts(gr.note_ids, 1) i), '[]'),
               'candidates', coalesce((SELECT jsonb_agg(jsonb_build_object('id', c.id, 'doc', c.doc,
                                                                           'context', c.context,
                                                                           'cosine', c.similarity,
                                                                           'segment', c.segment) ORDER BY c.n)
                                         FROM _fb_code_candidates(g.query, v.vectors, _fb_task_type(g.task_type), 20,
                                                                  key)
                                              WITH ORDINALITY AS c(id, lesson, correction, similarity, created_at,
                                                                   segment, doc, context, n)), '[]')))
      INTO code_data
      FROM _fb_golden_questions(fb_calibrate.split) g
     CROSS JOIN LATERAL (SELECT _fb_segments(g.query, segmenting) AS segs) s
     CROSS JOIN LATERAL (SELECT s.segs, fb_embed_batch(ARRAY[g.query] || s.segs, true, key) AS vectors) v
      LEFT JOIN _fb_golden_grades(fb_calibrate.split) gr ON gr.golden_id = g.id
     WHERE _fb_input_kind(g.query) = 'code';
    IF data IS NULL AND code_data IS NULL THEN
        RAISE EXCEPTION 'feedback_golden has no % questions', coalesce(split, 'golden')
            USING ERRCODE = 'no_data_found',
                  HINT = 'Insert golden questions (split tune) and grade their notes before calibrating.';
    END IF;
    IF code_data IS NOT NULL THEN
        -- fb_retrieve embeds a code input as the decision was fitted: whole, and in as many segments.
        decision := _fb_fit_decision(code_data, max_notes => 5, embedding_model => key) || segmenting;
    END IF;

    result := CASE WHEN data IS NOT NULL
                   THEN _fb_calibrate_sweep(data, lambda, 3, per_task_type, min_questions, tolerance,
                                            _fb_setting('pg_feedback.rerank_stage')::integer)
                   ELSE jsonb_build_object('groups', jsonb_build_array(jsonb_build_object('group', '*'))) END;
    sel := result -> 'selective' -> 'policy';

    IF apply THEN
        DELETE FROM feedback_retrieval_settings;
        INSERT INTO feedback_retrieval_settings (task_type, rerank, rerank_floor, relative_cut, max_notes,
                                                 cosine_floor, cosine_relative_cut, cosine_max_notes,
                                                 rerank_max_pairs, rerank_min_cosine, rerank_cosine_gap,
                                                 rerank_decided, rerank_decided_gap, rerank_tie_margin,
                                                 cosine_tie_margin, decision, embedding_model, rerank_model,
                                                 calibrated_by, calibration)
        SELECT g ->> 'group', (g ->> 'rerank')::boolean,
               (g -> 'cross_encoder' ->> 'floor')::real, coalesce((g -> 'cross_encoder' ->> 'relative_cut')::real, -1),
               (g -> 'cross_encoder' ->> 'max_notes')::integer,
               (g -> 'cosine' ->> 'floor')::real, coalesce((g -> 'cosine' ->> 'relative_cut')::real, -1),
               (g -> 'cosine' ->> 'max_notes')::integer,
               -- Selective bounds and margins are chosen over all questions: on the '*' row only.
               CASE WHEN g ->> 'group' = '*' THEN least((sel ->> 'max_pairs')::numeric, 1000)::integer END,
               CASE WHEN g ->> 'group' = '*' THEN coalesce((sel ->> 'min_cosine')::real, -1) END,
               CASE WHEN g ->> 'group' = '*' THEN coalesce((sel ->> 'cosine_gap')::real, 2) END,
               CASE WHEN g ->> 'group' = '*' THEN coalesce((sel ->> 'decided')::real, 100) END,
               CASE WHEN g ->> 'group' = '*' THEN coalesce((sel ->> 'decided_gap')::real, 2) END,
               CASE WHEN g ->> 'group' = '*' THEN (result ->> 'rerank_tie_margin')::real END,
               CASE WHEN g ->> 'group' = '*' THEN (result ->> 'cosine_tie_margin')::real END,
               CASE WHEN g ->> 'group' = '*' THEN decision END,
               key, cross_encoder, _fb_actor(),
               jsonb_build_object('split', fb_calibrate.split, 'lambda', lambda, 'tolerance', tolerance,
                                  'questions', g -> 'questions', 'cross_encoder', g -> 'cross_encoder' -> 'summary',
                                  'cosine', g -> 'cosine' -> 'summary',
                                  'selective', CASE WHEN g ->> 'group' = '*' THEN result -> 'selective' END)
          FROM jsonb_array_elements(result -> 'groups') g;
    END IF;

    RETURN QUERY
    SELECT x.* FROM (
        SELECT g ->> 'group' AS grp, (g ->> 'questions')::integer, (g ->> 'rerank')::boolean,
               (g -> 'cross_encoder' ->> 'floor')::real, (g -> 'cross_encoder' ->> 'relative_cut')::real,
               (g -> 'cross_encoder' ->> 'max_notes')::integer,
               (g -> 'cosine' ->> 'floor')::real, (g -> 'cosine' ->> 'relative_cut')::real,
               (g -> 'cosine' ->> 'max_notes')::integer,
               (c -> 'summary' ->> 'recall')::real, (c -> 'summary' ->> 'precision')::real,
               (c -> 'summary' ->> 'no_answer_correct')::real, (c ->> 'utility')::real
          FROM jsonb_array_elements(result -> 'groups') g
         CROSS JOIN LATERAL (SELECT CASE WHEN (g ->> 'rerank')::boolean THEN g -> 'cross_encoder'
                                         ELSE g -> 'cosine' END AS c) chosen
         WHERE g ? 'questions'
         UNION ALL
        -- The learned decision for code inputs: what it gives on the inputs it was fitted on.
        SELECT '(code)', (decision -> 'fitted_on' ->> 'inputs')::integer, NULL, NULL, NULL,
               (decision ->> 'max_notes')::integer, NULL, NULL, NULL,
               (decision -> 'fitted_on' -> 'outcome' ->> 'recall')::real,
               (decision -> 'fitted_on' -> 'outcome' ->> 'precision')::real,
               (decision -> 'fitted_on' -> 'outcome' ->> 'clean_empty')::real, NULL
         WHERE decision IS NOT NULL) x
     ORDER BY x.grp <> '*', x.grp = '(code)', x.grp;
END $$;

COMMENT ON FUNCTION fb_calibrate(text, real, boolean, integer, real, boolean, integer) IS
    'Chooses fb_retrieve''s settings on the golden questions of a split (default tune): scores every question''s '
    '20 first-stage candidates with the cross-encoder once, then for cross-encoder and cosine ranking picks the '
    'floor, relative cut and most notes that maximise (lessons found - lambda x irrelevant notes injected) / '
    'questions (lambda: what one misleading note costs, in found lessons; default 0.5), per task_type with at '
    'least min_questions questions and for all (''*''); reranks a task_type only where that beats cosine; picks '
    'the cheapest selective-reranking bounds (fewest pairs at the 95th percentile, then on average) whose '
    'recall@3 and precision stay within tolerance of reranking every candidate, and the near-tie margins. With '
    'apply (default) it replaces the rows of feedback_retrieval_settings. Returns the chosen cut and its numbers '
    'per row (of the scorer the row uses). Prose questions choose these; code inputs (_fb_input_kind) fit the '
    'learned decision instead (_fb_fit_decision: logistic regression over each candidate''s features times a gate, '
    'logistic regression over the input''s vector that tells whether any note applies to it; the '
    'threshold that maximises the worst of applicable notes injected, injected notes that apply and clean inputs '
    'left empty, at most 5 notes; each input embedded whole and, with code_segments > 0, in that many windows of '
    'lines too, which fb_retrieve then embeds as well), stored on the ''*'' row (decision) and reported as row ''(code)'' (recall_at_3: '
    'applicable notes injected; precision: injected notes that apply; no_answer_correct: clean inputs left empty). '
    'Report on the other split with fb_eval(split => ''test'').';
CREATE FUNCTION fb_eval_ann(sample integer DEFAULT 100, k integer DEFAULT 20, p_task_type text DEFAULT NULL)
    RETURNS TABLE (task_type text, queries integer, recall real, ann_returned real)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_column
BEGIN
    IF sample IS NULL OR sample < 1 OR k IS NULL OR k NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'sample must be positive and k between 1 and 1000, not % and %', sample, k
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'sample: how many notes serve as queries (e.g. 100); k: neighbours compared (e.g. 20).';
    END IF;
    RETURN QUERY
        WITH queries AS (
            SELECT n.task_type, _fb_vector(n, a.slot) AS embedding
              FROM feedback_notes n CROSS JOIN _fb_active() a
             WHERE n.status = 'active' AND _fb_has_vector(n, a.slot, a.model)
               AND (p_task_type IS NULL OR n.task_type = _fb_task_type(p_task_type))
             ORDER BY random()
             LIMIT sample
        ), per_query AS (
            SELECT q.task_type,
                   (SELECT array_agg(c.id) FROM _fb_candidates(q.embedding, q.task_type, k, 'exact') c) AS exact,
                   (SELECT array_agg(c.id) FROM _fb_candidates(q.embedding, q.task_type, k, 'ann') c) AS ann
              FROM queries q
        )
        SELECT coalesce(p.task_type, '(all)'),
               count(*)::integer,
               avg((SELECT count(*) FROM unnest(p.ann) a WHERE a = ANY (p.exact))::real / cardinality(p.exact))::real,
               avg(coalesce(cardinality(p.ann), 0))::real
          FROM per_query p
         GROUP BY GROUPING SETS ((p.task_type), ())
         ORDER BY grouping(p.task_type), 1;
END $$;

COMMENT ON FUNCTION fb_eval_ann(integer, integer, text) IS
    'Recall of the ANN stage against exact search: for sample random active notes (their embeddings as queries; '
    'of p_task_type only when given), the share of the k exact nearest notes of the same task_type that the index '
    'path (the task_type''s slice index when fb_maintain built one, else the global HNSW index; iterative scan) '
    'also returns, per task_type and overall, and how many it returned on average.';

CREATE VIEW fb_eval_history AS
SELECT r.id, r.run_at, r.k, r.embedding_model, r.scored_by, r.questions, r.recall_at_k, r.mrr, r.ndcg_at_k,
       r.no_answer_correct,
       r.recall_at_k - lag(r.recall_at_k) OVER w AS recall_change,
       r.mrr - lag(r.mrr) OVER w AS mrr_change,
       r.no_answer_correct - lag(r.no_answer_correct) OVER w AS no_answer_change,
       r.split, r."precision", r.misled_share, r.mean_injected,
       r."precision" - lag(r."precision") OVER w AS precision_change
  FROM fb_eval_runs r
WINDOW w AS (PARTITION BY r.k, r.split ORDER BY r.run_at, r.id);

COMMENT ON VIEW fb_eval_history IS
    'Every fb_eval run with its overall numbers and the change from the previous run with the same k and split.';

-- Closing the loop: reviewers judge what retrieval injected; judgments feed the golden set and show which notes
-- mislead.
CREATE TABLE feedback_retrieval_judgments (
    retrieval_id  bigint NOT NULL REFERENCES feedback_retrievals (id) ON DELETE CASCADE,
    note_id       bigint NOT NULL REFERENCES feedback_notes (id),
    relevant      boolean NOT NULL,
    judged_by     text NOT NULL DEFAULT session_user,
    judged_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (retrieval_id, note_id)
);
CREATE INDEX feedback_retrieval_judgments_note_id_idx ON feedback_retrieval_judgments (note_id);
SELECT pg_catalog.pg_extension_config_dump('feedback_retrieval_judgments', '');
COMMENT ON TABLE feedback_retrieval_judgments IS
    'A reviewer''s judgment (fb_judge) of a note a logged retrieval injected: relevant (helpful) or not '
    '(misleading); the latest judgment of a (retrieval, note) wins.';

-- SECURITY DEFINER: reviewers have no write right on feedback_retrieval_judgments, so a judgment is always this
-- function's: of a note the reviewer may see, in a retrieval that returned it, under the acting role's name.
CREATE FUNCTION fb_judge(retrieval_id bigint, note_id bigint, relevant boolean)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, pg_temp
    AS $$
#variable_conflict use_column
DECLARE
    r record;
    gid bigint;
BEGIN
    IF retrieval_id IS NULL OR note_id IS NULL OR relevant IS NULL THEN
        RAISE EXCEPTION 'retrieval_id, note_id and relevant must not be NULL'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'fb_judge(retrieval_id, note_id, true) marks a returned note helpful, false misleading.';
    END IF;
    SELECT * INTO r FROM feedback_retrievals WHERE id = fb_judge.retrieval_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no logged retrieval %', retrieval_id
            USING ERRCODE = 'no_data_found',
                  HINT = 'retrieval_id is what fb_retrieve returns while pg_feedback.log_retrievals is on.';
    END IF;
    IF NOT (fb_judge.note_id = ANY (r.note_ids)) THEN
        RAISE EXCEPTION 'note % was not returned by retrieval %', note_id, retrieval_id
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Judge the notes a retrieval injected: feedback_retrievals.note_ids.';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM feedback_notes f WHERE f.id = fb_judge.note_id AND _fb_tenant_allowed(f.tenant)) THEN
        RAISE EXCEPTION 'no note with id %', note_id
            USING ERRCODE = 'no_data_found', HINT = 'Judge notes of your own tenants or shared ones.';
    END IF;
    INSERT INTO feedback_retrieval_judgments AS j (retrieval_id, note_id, relevant, judged_by)
    VALUES (fb_judge.retrieval_id, fb_judge.note_id, fb_judge.relevant, _fb_actor())
    ON CONFLICT ON CONSTRAINT feedback_retrieval_judgments_pkey
    DO UPDATE SET relevant = excluded.relevant, judged_by = excluded.judged_by, judged_at = now();

    -- The golden set grows with use: the judged query becomes a golden question (the existing one with the same
    -- query and task_type, manual or judged, so it keeps its split), the note a grade 1 (helpful) or 0
    -- (misleading) judgment of it.
    FOR i IN 1..2 LOOP
        SELECT g.id INTO gid FROM feedback_golden g
         WHERE g.query = r.query AND g.task_type = r.task_type
         ORDER BY g.source = 'judged', g.id LIMIT 1;
        EXIT WHEN gid IS NOT NULL;
        INSERT INTO feedback_golden (query, task_type, source) VALUES (r.query, r.task_type, 'judged')
        ON CONFLICT (query, task_type) WHERE source = 'judged' DO NOTHING;
    END LOOP;
    INSERT INTO feedback_golden_judgments AS gj (golden_id, note_id, grade)
    VALUES (gid, fb_judge.note_id, CASE WHEN fb_judge.relevant THEN 1 ELSE 0 END)
    ON CONFLICT ON CONSTRAINT feedback_golden_judgments_pkey DO UPDATE SET grade = excluded.grade;
    RETURN gid;
END $$;
COMMENT ON FUNCTION fb_judge(bigint, bigint, boolean) IS
    'A reviewer marks a note a logged retrieval injected as helpful (true) or misleading (false). Recorded in '
    'feedback_retrieval_judgments, and fed into the golden set: the query becomes a golden question (source '
    'judged, split fixed by its text; or the existing question with that text) with the note graded 1 or 0, so '
    'fb_eval and fb_calibrate learn from use (a judged question counts once some note was judged helpful for it). '
    'Returns the golden question''s id.';

CREATE VIEW feedback_note_quality AS
SELECT n.id AS note_id, n.task_type, n.status, n.lesson,
       coalesce(i.injected, 0) AS injected, i.last_injected_at,
       coalesce(j.judged, 0) AS judged, coalesce(j.helpful, 0) AS helpful, coalesce(j.misleading, 0) AS misleading,
       (j.misleading::double precision / nullif(j.judged, 0))::real AS misleading_share
  FROM feedback_notes n
  LEFT JOIN (SELECT x.note_id, count(*) AS injected, max(r.retrieved_at) AS last_injected_at
               FROM feedback_retrievals r CROSS JOIN LATERAL unnest(r.note_ids) AS x(note_id)
              GROUP BY x.note_id) i ON i.note_id = n.id
  LEFT JOIN (SELECT jj.note_id, count(*) AS judged, count(*) FILTER (WHERE jj.relevant) AS helpful,
                    count(*) FILTER (WHERE NOT jj.relevant) AS misleading
               FROM feedback_retrieval_judgments jj GROUP BY jj.note_id) j ON j.note_id = n.id
 WHERE i.note_id IS NOT NULL OR j.note_id IS NOT NULL;
COMMENT ON VIEW feedback_note_quality IS
    'Per note that logged retrievals injected or reviewers judged: how often it was injected (and last when), '
    'judged, judged helpful, judged misleading, and the misleading share: a poisoned or stale lesson shows here '
    '(ORDER BY misleading DESC).';

-- pg_feedback: roles and privileges. Three group roles (NOLOGIN), created if missing; grant them to login roles:
--   GRANT feedback_reader TO app_readonly;   GRANT feedback_writer TO app;   GRANT feedback_reviewer TO alice;
-- PUBLIC gets nothing: no table, no function (internal or public) until one of these roles is granted.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'feedback_reader') THEN
        CREATE ROLE feedback_reader NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'feedback_writer') THEN
        CREATE ROLE feedback_writer NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'feedback_reviewer') THEN
        CREATE ROLE feedback_reviewer NOLOGIN;
    END IF;
    IF NOT pg_catalog.pg_has_role('feedback_writer', 'feedback_reader', 'MEMBER') THEN
        GRANT feedback_reader TO feedback_writer;
    END IF;
    IF NOT pg_catalog.pg_has_role('feedback_reviewer', 'feedback_writer', 'MEMBER') THEN
        GRANT feedback_writer TO feedback_reviewer;
    END IF;
END $$;

-- Every function of this extension: nothing for PUBLIC.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT d.objid::regprocedure
          FROM pg_catalog.pg_depend d
         WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.deptype = 'e'
           AND d.refclassid = 'pg_catalog.pg_extension'::regclass
           AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'pg_feedback')
    LOOP
        EXECUTE format('REVOKE ALL ON ROUTINE %s FROM PUBLIC', f);
    END LOOP;
END $$;
REVOKE ALL ON feedback_notes, feedback_note_merges, feedback_dedup_locks, feedback_pending_reports, feedback_audit,
              feedback_golden, fb_eval_runs, feedback_embedding_slots, feedback_reembed_runs, feedback_active_notes,
              feedback_review_queue, fb_eval_history, feedback_reembed_progress, feedback_embedding_status,
              feedback_worker, feedback_retrieval_settings, feedback_retrievals, feedback_golden_judgments,
              feedback_retrieval_judgments, feedback_note_quality, feedback_conflicts, feedback_slice_indexes,
              feedback_index_status FROM PUBLIC;
REVOKE ALL ON SEQUENCE feedback_note_merges_id_seq, feedback_notes_id_seq, feedback_audit_id_seq, feedback_golden_id_seq, fb_eval_runs_id_seq,
              feedback_reembed_runs_id_seq, feedback_retrievals_id_seq FROM PUBLIC;

-- Readers: retrieval, prompts, duplicates lookup, embeddings, screening and redaction; active notes of their
-- tenants through feedback_active_notes; which model is active. No right on feedback_notes itself. fb_retrieve,
-- fb_build_prompt and fb_find_duplicate run with the extension owner's rights (SECURITY DEFINER), so readers hold
-- no internal function of retrieval: not the candidate search, the reranker's stage, the prompt assembly nor the
-- retrieval log, which only fb_retrieve writes. The internal functions granted serve the public functions that
-- run as the caller (fb_embed*, fb_models, fb_embedding_model, the views).
GRANT SELECT ON feedback_active_notes, feedback_embedding_slots, feedback_worker, feedback_retrieval_settings
   TO feedback_reader;
GRANT EXECUTE ON FUNCTION
    fb_retrieve(text, text, integer, integer, real, boolean, text),
    fb_build_prompt(text, text, text, integer),
    fb_find_duplicate(text, text),
    fb_embed(text), fb_embed_query(text), fb_embed_batch(text[], boolean, text),
    fb_rerank(text, text[]), fb_count_tokens(text),
    fb_embedding_model(), fb_rerank_model(), fb_models(), fb_model_stats(),
    fb_content_hash(text, text, text, text), fb_document_text(text, text),
    fb_screen(text), fb_redact(text),
    fb_compare_notes(text, text, text), _fb_compare_lessons(text, text, text, double precision, text),
    _fb_compare_neighbours(text[], text, double precision[], text),
    _fb_compare_texts(text, text, double precision, double precision), _fb_residuals(text, text),
    _fb_dedup_neighbour(), _fb_needs_residuals(text[], text, double precision[]),
    _fb_embed_with(text, text[], boolean), _fb_model_key(text), _fb_default_model(), _fb_installed_models(),
    _fb_active(), _fb_active_slot(), _fb_active_model(), _fb_slot_of(text), _fb_resolve_model(text),
    _fb_normalize(text), _fb_setting(text), _fb_visible_notes(), _fb_worker_status()
TO feedback_reader;

-- Writers: readers' rights plus INSERT and COPY into feedback_notes, fb_ingest and fb_ingest_batch. No UPDATE or
-- DELETE anywhere, and no internal function: the triggers (SECURITY DEFINER) clean, count, embed and merge for
-- the caller, so a writer can neither take note ids, note re-submissions outside an INSERT, nor ask what became
-- of content it did not submit. No SELECT either (not even of ids): INSERT ... RETURNING is for reviewers;
-- fb_ingest returns the id and what became of the note.
GRANT INSERT ON feedback_notes TO feedback_writer;
GRANT EXECUTE ON FUNCTION
    fb_ingest(text, text, text, text, text, text, text),
    fb_ingest_batch(fb_note_input[], text, text[])
TO feedback_writer;

-- Reviewers: writers' rights plus the review queue, the lifecycle functions, the audit trail, merges, every note
-- (all statuses), golden questions and evaluation, the embedding and index status. Re-embedding, switching models
-- and building slice indexes (fb_maintain) stay with superusers.
GRANT SELECT ON feedback_notes, feedback_note_merges, feedback_audit, feedback_review_queue, feedback_conflicts,
                fb_eval_runs,
                fb_eval_history, feedback_reembed_runs, feedback_reembed_progress, feedback_embedding_status,
                feedback_retrievals, feedback_retrieval_judgments, feedback_note_quality, feedback_slice_indexes,
                feedback_index_status
   TO feedback_reviewer;
GRANT SELECT, INSERT, UPDATE, DELETE ON feedback_golden, feedback_golden_judgments, feedback_retrieval_settings
   TO feedback_reviewer;
GRANT USAGE ON SEQUENCE feedback_golden_id_seq, fb_eval_runs_id_seq TO feedback_reviewer;
GRANT INSERT ON fb_eval_runs TO feedback_reviewer;
GRANT EXECUTE ON FUNCTION
    fb_approve(bigint, text), fb_reject(bigint, text), fb_deprecate(bigint, text), fb_restore(bigint, text),
    fb_deprecate_stale(interval, text), fb_purge(bigint, text), fb_purge_merged(text, text),
    fb_eval(integer, boolean, text, text), fb_eval_ann(integer, integer, text), _fb_reembed_running(integer, timestamptz),
    fb_calibrate(text, real, boolean, integer, real, boolean, integer), fb_judge(bigint, bigint, boolean),
    _fb_golden_grades(text), _fb_golden_questions(text), _fb_question_metrics(bigint[], bigint[], smallint[], integer),
    _fb_calibrate_sweep(jsonb, double precision, integer, boolean, integer, double precision, integer),
    _fb_split_of(text),
    fb_notes_by(text, timestamptz), fb_purge_by(text, timestamptz, text),
    fb_unmerge(bigint, text), fb_find_conflicts(text, boolean), fb_merge(bigint, bigint, text),
    -- What fb_eval, fb_calibrate, fb_eval_ann and the review queue call as the reviewer.
    _fb_vector(feedback_notes, smallint), _fb_has_vector(feedback_notes, smallint, text),
    _fb_candidates(vector, text, integer, text, text, boolean, text),
    _fb_lexical_candidates(vector, tsquery, text, integer, text), _fb_search_terms(text),
    _fb_lexical_terms(text, text, integer), _fb_slice_index(text, text),
    _fb_slice_index_statement(text, smallint, boolean),
    _fb_first_stage(text, vector, text, integer, text), _fb_settings(text, text), _fb_retrieval_gucs(),
    _fb_settings_metadata(),
    _fb_my_tenants(), _fb_actor(), _fb_task_type(text), _fb_tenant_allowed(text),
    _fb_input_kind(text), _fb_segments(text, jsonb), _fb_code_candidates(text, vector[], text, integer, text),
    _fb_fit_decision(jsonb, integer, text), _fb_decision(text), _fb_shipped_decision()
TO feedback_reviewer;

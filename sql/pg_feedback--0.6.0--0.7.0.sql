-- pg_feedback 0.6.0 -> 0.7.0: retrieval for what the model reviews (issue 19). A code input (snippet, diff,
-- config file) is embedded whole and in segments and read by a learned decision (shipped, or fitted by
-- fb_calibrate on the team's golden code inputs) that injects every note likely to apply; fb_eval reports per kind
-- of input; a caller's min_score is a ranking mode (no relative cut). Notes may carry their context (the reviewed
-- input), whose words the decision reads: a new column of feedback_notes (and of the merge records), an optional
-- argument of fb_ingest and fb_ingest_batch. Nothing stored changes; the new columns start blank.
\echo Use "ALTER EXTENSION pg_feedback UPDATE TO '0.7.0'" to load this file. \quit

ALTER TABLE feedback_retrieval_settings ADD COLUMN decision jsonb;
COMMENT ON TABLE feedback_retrieval_settings IS
    'How fb_retrieve cuts and reranks, per task_type (''*'': every task_type without its own row), as fb_calibrate '
    'chose it on golden questions: whether reranking pays off, floors, relative cuts (drop notes scoring this far '
    'below the best), most notes returned, the selective-reranking bounds and the near-tie margins, with the '
    'models and the numbers it was chosen on (calibration); on the ''*'' row, decision: the learned final '
    'decision for code inputs fb_calibrate fitted (NULL: the shipped one). A NULL column falls back to the ''*'' row, then to '
    'the pg_feedback.* setting of the same name. A row whose embedding_model is not the model searched, or whose '
    'rerank_model is not pg_feedback.rerank_model, does not apply (its floors and bounds are in another model''s '
    'scale). Delete the rows to go back to the settings.';

-- Notes may carry their context: the reviewed input (code, diff) the correction was made on.
ALTER TABLE feedback_notes ADD COLUMN context text NOT NULL DEFAULT '';
ALTER TABLE feedback_pending_reports ADD COLUMN context text NOT NULL DEFAULT '';
ALTER TABLE feedback_note_merges ADD COLUMN context text NOT NULL DEFAULT '';
COMMENT ON TABLE feedback_note_merges IS
    'Provenance of near-duplicate merges: a submitted note (merged_hash = its content hash, its text and source) '
    'that was folded into an existing note (into_id) because their embeddings had cosine similarity >= '
    'pg_feedback.dup_threshold; context: the reviewed input it carried.';
CREATE OR REPLACE FUNCTION _fb_cleaned(n feedback_notes) RETURNS feedback_notes
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    c record;
    s record;
    x record;
BEGIN
    SELECT * INTO c FROM _fb_clean_note(n.task_type, n.wrong_answer, n.correction, n.lesson, n.tenant);
    SELECT * INTO s FROM _fb_clean_field('source', n.source);   -- NULL source: no row, s stays NULL
    -- The context (the reviewed input behind the note) is redacted, not screened: it is code, and it never reaches
    -- a prompt (only lesson and correction do); fb_retrieve reads its words.
    SELECT * INTO x FROM _fb_clean_field('context', coalesce(n.context, ''));
    n.content_hash := c.content_hash;
    n.task_type := c.task_type;
    n.wrong_answer := c.wrong_answer;
    n.correction := c.correction;
    n.lesson := c.lesson;
    n.tenant := c.tenant;
    n.source := s.text;
    n.context := x.text;
    n.screening := c.screening || coalesce(s.screening, '[]');
    n.redactions := ARRAY(SELECT DISTINCT k FROM unnest(c.redactions || s.kinds || x.kinds) k WHERE k IS NOT NULL
                           ORDER BY k);
    RETURN n;
END $$;
COMMENT ON FUNCTION _fb_cleaned(feedback_notes) IS 'Internal: a note as the server stores it (see _fb_clean_note).';
CREATE OR REPLACE FUNCTION _fb_resubmit(n feedback_notes) RETURNS feedback_notes
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
BEGIN
    IF pg_trigger_depth() = 0 THEN
        RAISE EXCEPTION '_fb_resubmit is called by the insert trigger of feedback_notes only'
            USING ERRCODE = 'insufficient_privilege', HINT = 'Submit notes with INSERT, COPY or fb_ingest.';
    END IF;
    n := _fb_cleaned(n);
    IF NOT _fb_tenant_allowed(n.tenant) THEN
        RETURN n;   -- the insert goes on and is refused by its tenant check
    END IF;
    IF NOT EXISTS (SELECT 1 FROM feedback_notes f
                    WHERE f.content_hash = n.content_hash AND f.tenant IS NOT DISTINCT FROM n.tenant) THEN
        RETURN n;
    END IF;
    INSERT INTO feedback_pending_reports (content_hash, tenant, task_type, wrong_answer, source, context)
    VALUES (n.content_hash, n.tenant, n.task_type, coalesce(n.wrong_answer, ''),
            CASE WHEN n.source IS NULL OR _fb_normalize(n.source) <> '' THEN _fb_source(n.source) END,
            coalesce(n.context, ''));
    RETURN NULL;
END $$;
COMMENT ON FUNCTION _fb_resubmit(feedback_notes) IS
    'Internal: notes a re-submission of the stored note with the same content (counted by the statement''s AFTER '
    'trigger) and returns NULL; when no such note is stored, returns the note cleaned for storing.';
CREATE OR REPLACE FUNCTION _fb_count_reports() RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    rep record;
    stored record;
    counted integer := 0;
BEGIN
    FOR rep IN
        SELECT p.content_hash, p.tenant, count(*) AS reports,
               (array_agg(p.wrong_answer ORDER BY p.ord DESC) FILTER (WHERE p.wrong_answer <> ''))[1] AS wrong_answer,
               (array_agg(p.source ORDER BY p.ord DESC) FILTER (WHERE p.source IS NOT NULL))[1] AS source,
               (array_agg(p.context ORDER BY p.ord DESC) FILTER (WHERE btrim(p.context) <> ''))[1] AS context
          FROM feedback_pending_reports p
         WHERE p.xid = pg_current_xact_id()
         GROUP BY p.content_hash, p.tenant
         ORDER BY p.content_hash
    LOOP
        -- The stored note, or, if a reviewer's approval merged it away since the row trigger saw it, the note it
        -- was merged into (same tenant and task_type, so under the same lock).
        UPDATE feedback_notes f
           SET wrong_answer = CASE WHEN f.status = 'purged' THEN f.wrong_answer
                                   ELSE coalesce(rep.wrong_answer, f.wrong_answer) END,
               source = CASE WHEN f.status = 'purged' THEN f.source ELSE coalesce(rep.source, f.source) END,
               context = CASE WHEN f.status = 'purged' THEN f.context ELSE coalesce(rep.context, f.context) END,
               updated_at = now(),
               report_count = f.report_count + rep.reports
         WHERE f.id = coalesce(
                   (SELECT s.id FROM feedback_notes s
                     WHERE s.content_hash = rep.content_hash AND s.tenant IS NOT DISTINCT FROM rep.tenant),
                   (SELECT m.into_id FROM feedback_note_merges m
                     WHERE m.merged_hash = rep.content_hash ORDER BY m.merged_at DESC LIMIT 1))
        RETURNING f.id, f.status INTO stored;
        IF NOT FOUND THEN
            -- Edited into other content by its owner meanwhile: never drop a report silently.
            RAISE EXCEPTION 'the note re-submitted by this statement changed while the statement ran'
                USING ERRCODE = 'serialization_failure', HINT = 'Retry the statement.';
        END IF;
        counted := counted + rep.reports;
        IF stored.status <> 'active' THEN
            RAISE NOTICE 'note % is %: the report was counted, and it stays % (not retrieved)', stored.id,
                         stored.status, stored.status
                USING HINT = CASE stored.status
                                 WHEN 'deprecated' THEN 'A reviewer can bring it back with fb_restore.'
                                 WHEN 'pending' THEN 'It waits for a reviewer (feedback_review_queue).'
                                 WHEN 'rejected' THEN 'A reviewer rejected it; fb_approve would make it live.'
                                 ELSE 'Its text was purged; it is never retrieved again.' END;
        END IF;
    END LOOP;
    -- This statement's reports, and any left by a transaction that has ended (none can be, as only the insert
    -- trigger notes them, but a report never outlives its transaction).
    DELETE FROM feedback_pending_reports p
     WHERE p.xid = pg_current_xact_id() OR p.xid < pg_snapshot_xmin(pg_current_snapshot());
    RETURN counted;
END $$;
COMMENT ON FUNCTION _fb_count_reports() IS
    'Internal: counts the re-submissions noted by the current statement on their stored notes (AFTER INSERT).';
CREATE OR REPLACE FUNCTION _fb_merge_near_duplicates(ids bigint[]) RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    threshold double precision := _fb_setting('pg_feedback.dup_threshold')::double precision;
    model text;
    slot smallint;
    r record;
    near record;
    merged integer := 0;
BEGIN
    IF threshold >= 1 OR ids IS NULL THEN
        RETURN 0;
    END IF;
    SELECT a.slot, a.model INTO slot, model FROM _fb_active() a;
    PERFORM _fb_lock_dedup(array_agg(coalesce(f.tenant, '')), array_agg(f.task_type))
       FROM feedback_notes f WHERE f.id = ANY (ids);
    FOR r IN
        SELECT f.*, _fb_vector(f, slot) AS vec
          FROM unnest(ids) WITH ORDINALITY AS i(id, n) JOIN feedback_notes f USING (id)
         WHERE _fb_has_vector(f, slot, model) AND f.status = 'active' ORDER BY i.n
    LOOP
        -- The row may have absorbed or been absorbed by an earlier one of this batch.
        CONTINUE WHEN NOT EXISTS (SELECT 1 FROM feedback_notes f WHERE f.id = r.id);
        SELECT c.id, 1 - c.distance AS similarity INTO near
          FROM _fb_candidates(r.vec, r.task_type, 2, 'auto', r.tenant, true, model) c
         WHERE c.id <> r.id
         ORDER BY c.distance
         LIMIT 1;
        CONTINUE WHEN near.id IS NULL OR near.similarity < threshold;
        UPDATE feedback_notes
           SET report_count = report_count + r.report_count, source = r.source, updated_at = now(),
               context = CASE WHEN btrim(context) = '' THEN r.context ELSE context END
         WHERE id = near.id AND status = 'active';
        CONTINUE WHEN NOT FOUND;   -- deprecated meanwhile by a reviewer: the new note stays
        INSERT INTO feedback_note_merges (merged_hash, into_id, similarity, task_type, lesson, correction, source,
                                          merged_by, context)
        VALUES (r.content_hash, near.id, near.similarity, r.task_type, r.lesson, r.correction, r.source, _fb_actor(),
                r.context);
        INSERT INTO feedback_audit (actor, action, note_id, detail)
        VALUES (_fb_actor(), 'merge', near.id,
                jsonb_build_object('merged_hash', r.content_hash, 'similarity', round(near.similarity::numeric, 4)));
        -- Notes merged into this one earlier in the batch now belong to its target.
        UPDATE feedback_note_merges SET into_id = near.id WHERE into_id = r.id;
        DELETE FROM feedback_notes WHERE id = r.id;
        merged := merged + 1;
    END LOOP;
    RETURN merged;
END $$;
COMMENT ON FUNCTION _fb_merge_near_duplicates(bigint[]) IS
    'Internal: merges new notes into near-duplicate active notes of the same task_type and tenant '
    '(pg_feedback.dup_threshold, active model). Runs inside the insert trigger with the owner''s rights.';
CREATE OR REPLACE FUNCTION _fb_notes_before_update() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    active record;
    text_changed boolean;
BEGIN
    IF NEW.status = 'purged' THEN
        RETURN NEW;   -- fb_purge blanks the text: the note keeps its id and is never embedded again
    END IF;
    IF (NEW.task_type, NEW.lesson, NEW.correction, NEW.tenant) IS NOT DISTINCT FROM
       (OLD.task_type, OLD.lesson, OLD.correction, OLD.tenant) THEN
        NEW.wrong_answer := fb_redact(NEW.wrong_answer);
        NEW.context := fb_redact(NEW.context);
        NEW.updated_at := now();
        RETURN NEW;
    END IF;
    NEW := _fb_cleaned(NEW);
    NEW.id := OLD.id;
    NEW.redactions := ARRAY(SELECT DISTINCT unnest(OLD.redactions || NEW.redactions) ORDER BY 1);
    IF NEW.content_hash <> OLD.content_hash
       AND EXISTS (SELECT 1 FROM feedback_notes f WHERE f.content_hash = NEW.content_hash) THEN
        RAISE EXCEPTION 'another note already has this content (id %)',
                        (SELECT f.id FROM feedback_notes f WHERE f.content_hash = NEW.content_hash)
            USING ERRCODE = 'unique_violation',
                  HINT = 'Deprecate this note with fb_deprecate instead of editing it into a duplicate.';
    END IF;
    text_changed := fb_document_text(NEW.task_type, NEW.lesson) <> fb_document_text(OLD.task_type, OLD.lesson);
    SELECT * INTO active FROM _fb_lock_active_model();
    IF text_changed THEN
        -- Both slots' vectors were of the old text.
        NEW := _fb_with_vector(_fb_with_vector(NEW, 1::smallint, NULL, NULL), 2::smallint, NULL, NULL);
    END IF;
    IF text_changed OR NOT _fb_has_vector(NEW, active.slot, active.model) THEN
        NEW := _fb_with_vector(NEW, active.slot,
                               (fb_embed_batch(ARRAY[fb_document_text(NEW.task_type, NEW.lesson)], false,
                                               active.model))[1], active.model);
    END IF;
    NEW.updated_at := now();
    RETURN NEW;
END $$;
COMMENT ON FUNCTION _fb_notes_before_update() IS
    'Trigger: re-cleans an edited note (redaction, screening, content hash; the id stays) and re-embeds it when its '
    'embedded text changed.';
DROP TRIGGER feedback_notes_before_update ON feedback_notes;
CREATE TRIGGER feedback_notes_before_update
    BEFORE UPDATE OF task_type, wrong_answer, lesson, correction, tenant, context ON feedback_notes
    FOR EACH ROW EXECUTE FUNCTION _fb_notes_before_update();
DROP FUNCTION fb_ingest(text, text, text, text, text, text);
DROP FUNCTION fb_ingest_batch(fb_note_input[], text);
CREATE FUNCTION fb_ingest_batch(notes fb_note_input[], tenant text DEFAULT NULL, contexts text[] DEFAULT NULL)
    RETURNS TABLE (id bigint, action text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_column
DECLARE
    inserted text[];
BEGIN
    IF notes IS NOT NULL AND contexts IS NOT NULL AND cardinality(contexts) <> cardinality(notes) THEN
        RAISE EXCEPTION 'contexts has % elements for % notes', cardinality(contexts), cardinality(notes)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass one context per note, in the same order (NULL or '''' for a note without one), or none.';
    END IF;
    -- RETURNING lists the rows this INSERT really added: a re-submission of a stored note is turned into a
    -- counted report by the insert trigger and is not returned. Two sessions inserting the same new note at once
    -- meet at the content hash: the loser's whole INSERT is rolled back to its savepoint and run again, and then
    -- finds the winner's row and counts a report on it. Rows go in in content order, so two batches that share
    -- several new notes meet at the first of them and never deadlock at the content-hash index.
    FOR attempt IN 1..3 LOOP
        BEGIN
            WITH ins AS (
                INSERT INTO feedback_notes AS f (task_type, wrong_answer, correction, lesson, source, tenant, context)
                SELECT n.task_type, coalesce(n.wrong_answer, ''), n.correction, n.lesson, n.source, fb_ingest_batch.tenant,
                       coalesce(contexts[n.ord], '')
                  FROM unnest(notes) WITH ORDINALITY AS n(task_type, wrong_answer, correction, lesson, source, ord)
                 ORDER BY fb_content_hash(n.task_type, n.lesson, n.correction, fb_ingest_batch.tenant), ord
                RETURNING f.content_hash)
            SELECT coalesce(array_agg(ins.content_hash), '{}') INTO inserted FROM ins;
            EXIT;
        EXCEPTION WHEN unique_violation THEN
            -- Under REPEATABLE READ and SERIALIZABLE the winner's row stays invisible to this snapshot: running
            -- the INSERT again would fail the same way.
            IF current_setting('transaction_isolation') NOT IN ('read committed', 'read uncommitted') THEN
                RAISE EXCEPTION 'could not store the note: another transaction stored the same content after this '
                                'transaction''s snapshot was taken'
                    USING ERRCODE = 'serialization_failure',
                          DETAIL = format('Transaction isolation is %s.', current_setting('transaction_isolation')),
                          HINT = 'Retry the transaction: the retry counts a report on the stored note.';
            ELSIF attempt = 3 THEN
                RAISE;
            END IF;
        END;
    END LOOP;

    RETURN QUERY
    WITH input AS (
        -- The stored content hash: of the redacted text, task_type too (the insert already refused blank or
        -- oversized fields).
        SELECT n.ord, fb_content_hash(fb_redact(n.task_type), fb_redact(n.lesson), fb_redact(n.correction),
                                      fb_ingest_batch.tenant) AS hash
          FROM unnest(notes) WITH ORDINALITY AS n(task_type, wrong_answer, correction, lesson, source, ord)
    ), outcome AS (
        SELECT * FROM _fb_ingest_outcomes((SELECT array_agg(hash) FROM input))
    )
    SELECT coalesce(o.into_id, o.id),
           CASE WHEN o.into_id IS NOT NULL THEN 'merged'
                WHEN c.hash IS NULL OR row_number() OVER (PARTITION BY i.hash ORDER BY i.ord) > 1 THEN
                     CASE WHEN o.status = 'active' THEN 'updated' ELSE o.status END
                WHEN o.status = 'pending' THEN 'pending'
                ELSE 'inserted' END
      FROM input i
      LEFT JOIN (SELECT DISTINCT unnest(inserted) AS hash) c ON c.hash = i.hash
      LEFT JOIN outcome o ON o.content_hash = i.hash
     ORDER BY i.ord;
END $$;
COMMENT ON FUNCTION fb_ingest_batch(fb_note_input[], text, text[]) IS
    'Stores many notes with one INSERT (embedded in batched model runs), all of one tenant (NULL: shared); '
    'contexts: the reviewed input behind each note, in the same order (optional). Returns, '
    'in input order, each note''s id and action: inserted; pending when it waits for a reviewer (flagged by '
    'fb_screen, or pg_feedback.review = all); merged when it was folded into a near-duplicate (the id is then the '
    'existing note''s); for the same correction already stored (or repeated in the batch), a counted report: updated '
    'when that note is active, else its status (deprecated, pending, rejected, purged), which a report never changes.';
CREATE FUNCTION fb_ingest(task_type text, wrong_answer text, correction text, lesson text,
                          source text DEFAULT 'review_ui', tenant text DEFAULT NULL, context text DEFAULT NULL)
    RETURNS TABLE (id bigint, action text)
    LANGUAGE sql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT * FROM fb_ingest_batch(ARRAY[ROW(task_type, wrong_answer, correction, lesson, source)::fb_note_input],
                                      tenant, ARRAY[context]);
    END;
COMMENT ON FUNCTION fb_ingest(text, text, text, text, text, text, text) IS
    'Stores one note: returns its id and action (see fb_ingest_batch); context: the reviewed input (code, diff) '
    'the correction was made on, optional, whose words help match code under review. Secrets are redacted first; submitting the '
    'same correction again counts a report on the stored note (latest wrong_answer and source, report_count + 1), '
    'never duplicates it; a note whose embedding is within pg_feedback.dup_threshold of an active note of the same '
    'task_type and tenant is merged into it.';
CREATE OR REPLACE FUNCTION _fb_purge_note(note_id bigint, why text, action text, merges_of text DEFAULT NULL)
    RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    old text;
    hash text;
    merges integer;
    kept integer;
BEGIN
    SELECT f.status, f.content_hash INTO old, hash
      FROM feedback_notes f WHERE f.id = note_id AND _fb_tenant_allowed(f.tenant) FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no note with id %', coalesce(note_id::text, 'NULL')
            USING ERRCODE = 'no_data_found',
                  HINT = 'Take the id from feedback_notes or fb_ingest''s result; for the text of a merged report '
                         'use fb_purge_merged(merged_hash, reason).';
    END IF;
    UPDATE feedback_notes
       SET wrong_answer = '', correction = '[purged]', lesson = '[purged]', context = '', embedding = NULL,
           embedding_model = NULL,
           embedding_alt = NULL, embedding_alt_model = NULL, screening = '[]', status = 'purged', updated_at = now()
     WHERE id = note_id;
    UPDATE feedback_note_merges m SET lesson = '[purged]', correction = '[purged]', context = ''
     WHERE m.into_id = note_id AND (merges_of IS NULL OR m.merged_by = merges_of);
    GET DIAGNOSTICS merges = ROW_COUNT;
    SELECT count(*) INTO kept FROM feedback_note_merges m WHERE m.into_id = note_id AND m.lesson <> '[purged]';
    INSERT INTO feedback_audit (actor, action, note_id, content_hash, old_status, new_status, reason, detail)
    VALUES (_fb_actor(), action, note_id, hash, old, 'purged', why,
            jsonb_build_object('merge_records_cleared', merges, 'merge_records_kept', kept));
    RETURN merges;
END $$;
COMMENT ON FUNCTION _fb_purge_note(bigint, text, text, text) IS
    'Internal: removes a note''s text and that of the merge records folded into it (all, or one role''s), audited.';
CREATE OR REPLACE FUNCTION fb_purge_merged(merged_hash text, reason text) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    why text := _fb_require_reason(reason, 'fb_purge_merged');
    cleared integer;
BEGIN
    UPDATE feedback_note_merges m SET lesson = '[purged]', correction = '[purged]', context = ''
      FROM feedback_notes t
     WHERE t.id = m.into_id AND _fb_tenant_allowed(t.tenant) AND m.merged_hash = fb_purge_merged.merged_hash;
    GET DIAGNOSTICS cleared = ROW_COUNT;
    IF cleared = 0 THEN
        RAISE EXCEPTION 'no merge record with merged_hash "%"', merged_hash
            USING ERRCODE = 'no_data_found', HINT = 'Take merged_hash from feedback_note_merges.';
    END IF;
    INSERT INTO feedback_audit (actor, action, content_hash, reason, detail)
    VALUES (_fb_actor(), 'purge_merged', merged_hash, why, jsonb_build_object('merge_records_cleared', cleared));
    RETURN cleared;
END $$;
COMMENT ON FUNCTION fb_purge_merged(text, text) IS
    'Reviewer: removes the text of a report that was merged into another note (feedback_note_merges, by its '
    'merged_hash) for a leaked secret; returns how many merge records were cleared. Audited.';

-- The code-input decision (Rust).
-- pg_feedback::decide::_fb_input_kind
CREATE  FUNCTION "_fb_input_kind"(
	"query" TEXT /* & str */
) RETURNS TEXT /* & '_ str */
IMMUTABLE STRICT PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_input_kind_wrapper';
-- pg_feedback::decide::_fb_segments
CREATE  FUNCTION "_fb_segments"(
	"query" TEXT /* & str */
) RETURNS TEXT[] /* Vec < String > */
IMMUTABLE STRICT PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_segments_wrapper';
-- pg_feedback::decide::_fb_shipped_decision
CREATE  FUNCTION "_fb_shipped_decision"() RETURNS jsonb /* JsonB */
IMMUTABLE STRICT PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_shipped_decision_wrapper';
-- pg_feedback::decide::_fb_decide
CREATE  FUNCTION "_fb_decide"(
	"query" TEXT, /* & str */
	"docs" TEXT[], /* Vec < Option < String > > */
	"contexts" TEXT[], /* Vec < Option < String > > */
	"cosines" real[], /* Vec < Option < f32 > > */
	"segment_cosines" real[], /* Vec < Option < f32 > > */
	"n_segments" INT, /* i32 */
	"decision" jsonb /* JsonB */
) RETURNS real[] /* Vec < f32 > */
IMMUTABLE STRICT PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_decide_wrapper';
-- pg_feedback::decide::_fb_fit_decision
CREATE  FUNCTION "_fb_fit_decision"(
	"inputs" jsonb, /* JsonB */
	"max_notes" INT, /* i32 */
	"embedding_model" TEXT /* & str */
) RETURNS jsonb /* JsonB */
IMMUTABLE STRICT PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_fb_fit_decision_wrapper';

-- Retrieval.
CREATE OR REPLACE FUNCTION _fb_log_retrieval(query text, task_type text, note_ids bigint[], scores real[], scored_by text,
                                  embedding_model text, rerank_model text)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, pg_temp
    AS $$
DECLARE
    rid bigint;
BEGIN
    IF NOT _fb_setting('pg_feedback.log_retrievals')::boolean OR pg_is_in_recovery()
       OR current_setting('transaction_read_only')::boolean THEN
        RETURN NULL;
    END IF;
    IF coalesce(cardinality(note_ids), 0) > 1000 OR coalesce(cardinality(note_ids), 0) <> coalesce(cardinality(scores), 0)
       OR scored_by IS NULL OR scored_by NOT IN ('cross-encoder', 'cosine', 'decision') OR task_type IS NULL THEN
        RAISE EXCEPTION 'not a retrieval fb_retrieve could log'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Retrievals are logged by fb_retrieve itself.';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(note_ids) AS r(id)
                WHERE NOT EXISTS (SELECT 1 FROM feedback_notes n
                                   WHERE n.id = r.id AND n.status = 'active'
                                     AND n.task_type = _fb_log_retrieval.task_type
                                     AND (n.tenant IS NULL OR n.tenant = ANY (_fb_my_tenants())))) THEN
        RAISE EXCEPTION 'a retrieval can log only active notes of its task_type that the acting role may retrieve'
            USING ERRCODE = 'insufficient_privilege', HINT = 'Retrievals are logged by fb_retrieve itself.';
    END IF;
    INSERT INTO feedback_retrievals (retrieved_by, query, task_type, note_ids, scores, scored_by, embedding_model,
                                     rerank_model)
    VALUES (_fb_actor(), fb_redact(query), task_type, coalesce(note_ids, '{}'), coalesce(scores, '{}'), scored_by,
            embedding_model, rerank_model)
    RETURNING id INTO rid;
    RETURN rid;
END $$;
COMMENT ON FUNCTION _fb_log_retrieval(text, text, bigint[], real[], text, text, text) IS
    'Internal: records a retrieval in feedback_retrievals (query redacted); NULL on a standby or in a read-only '
    'transaction.';
CREATE FUNCTION _fb_decision(p_model text) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, @extschema@, pg_temp
    BEGIN ATOMIC
        SELECT coalesce((SELECT d.decision FROM feedback_retrieval_settings d
                          WHERE d.task_type = '*' AND d.decision IS NOT NULL
                            AND d.decision ->> 'embedding_model' = p_model),
                        (SELECT x.d FROM (SELECT _fb_shipped_decision() AS d) x
                          WHERE x.d ->> 'embedding_model' = p_model));
    END;
COMMENT ON FUNCTION _fb_decision(text) IS
    'Internal: the decision fb_retrieve applies to code inputs searched with an embedding model (the calibrated '
    'one on the ''*'' row of feedback_retrieval_settings, else the shipped one when fitted for that model), or NULL.';
CREATE FUNCTION _fb_code_candidates(query text, vectors vector[], p_task_type text, candidate_k integer, model text)
    RETURNS TABLE (id bigint, lesson text, correction text, similarity real, created_at timestamptz,
                   segment real, doc text, context text)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT f.id, f.lesson, f.correction, f.similarity, f.created_at,
               (SELECT max(1 - (_fb_vector(note, _fb_slot_of(model)) <=> v))::real FROM unnest(vectors) v),
               note.lesson || ' ' || note.correction || ' ' || note.wrong_answer, note.context
          FROM (SELECT c.id, c.lesson, c.correction, (1 - c.distance)::real AS similarity, c.created_at,
                       row_number() OVER (ORDER BY c.distance, c.id) AS pos
                  FROM _fb_candidates(vectors[1], p_task_type, candidate_k, model => model) c) f
          JOIN feedback_notes note ON note.id = f.id
         ORDER BY f.pos;
    END;
COMMENT ON FUNCTION _fb_code_candidates(text, vector[], text, integer, text) IS
    'Internal: a code input''s candidate_k nearest notes (vectors[1]: the whole input; dense only), best first, with the best '
    'cosine of any of its vectors, the note''s lesson, correction and wrong answer, and its context (what '
    '_fb_decide reads).';
CREATE OR REPLACE FUNCTION fb_retrieve(query text, task_type text, candidate_k integer DEFAULT 20, final_k integer DEFAULT NULL,
                            min_score real DEFAULT NULL, rerank boolean DEFAULT NULL, model text DEFAULT NULL)
    RETURNS TABLE (rank integer, id bigint, lesson text, correction text, similarity real, rerank_score real,
                   scored_by text, created_at timestamptz, retrieval_id bigint)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_column
DECLARE
    key text;
    tt text;
    q vector(384);
    s record;
    use_rerank boolean;
    cand record;
    scores real[];
    picked integer[];
    rid bigint;
    segs text[] := '{}';
    vectors vector[];
    decision jsonb;
    scorer text;
BEGIN
    IF candidate_k IS NULL OR candidate_k NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'candidate_k must be between 1 and 1000, not %', candidate_k
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Over-fetch about 20 candidates for the reranker.';
    END IF;
    IF final_k NOT BETWEEN 1 AND candidate_k THEN
        RAISE EXCEPTION 'final_k must be between 1 and candidate_k (%), not %', candidate_k, final_k
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'final_k is how many notes to return at most (NULL: the calibrated max_notes).';
    END IF;
    -- Nothing is asked: no note applies (an empty question's vector would still be near some note).
    IF query IS NULL OR task_type IS NULL OR _fb_normalize(query) = '' THEN
        RETURN;
    END IF;
    -- Embedded in its own step, through the backend's query cache; first, so that the library is loaded and its
    -- settings defined before they are read. Only notes embedded by the same model are compared with it.
    key := _fb_resolve_model(model);
    -- A code input (snippet, diff, config file) is read by the learned decision, when there is one for this model:
    -- its segments are embedded with it, in the same call.
    IF _fb_input_kind(query) = 'code' THEN
        decision := _fb_decision(key);
    END IF;
    IF decision IS NOT NULL THEN
        segs := _fb_segments(query);
    END IF;
    vectors := fb_embed_batch(ARRAY[query] || segs, true, key);
    q := vectors[1];
    IF model IS NOT NULL AND _fb_slot_of(key) IS NULL THEN
        RAISE EXCEPTION 'no note is embedded with model "%"', model
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = format('CALL fb_reembed(%L) (superuser) embeds the notes with it first; SELECT * FROM '
                                'feedback_embedding_slots shows which models hold vectors.', model);
    END IF;
    tt := _fb_task_type(fb_retrieve.task_type);
    SELECT * INTO s FROM _fb_settings(tt, key);
    use_rerank := decision IS NULL AND coalesce(rerank, s.rerank) AND fb_rerank_model() <> '';
    scorer := CASE WHEN decision IS NOT NULL THEN 'decision' WHEN use_rerank THEN 'cross-encoder' ELSE 'cosine' END;
    IF decision IS NOT NULL THEN
        SELECT array_agg(c.id ORDER BY c.n) AS ids,
               array_agg(c.lesson ORDER BY c.n) AS lessons,
               array_agg(c.correction ORDER BY c.n) AS corrections,
               array_agg(c.similarity ORDER BY c.n) AS sims,
               array_agg(c.created_at ORDER BY c.n) AS created,
               array_agg(c.segment ORDER BY c.n) AS segments,
               array_agg(c.doc ORDER BY c.n) AS docs,
               array_agg(c.context ORDER BY c.n) AS contexts
          INTO cand
          FROM _fb_code_candidates(query, vectors, tt, candidate_k, key) WITH ORDINALITY AS c(id, lesson, correction,
                                                                                               similarity, created_at,
                                                                                               segment, doc, context,
                                                                                               n);
        IF cand.ids IS NOT NULL THEN
            -- The probability that each note applies; every note at or above the decision's threshold (a note with
            -- a context has its own), best first, at most its max_notes (a caller's min_score and final_k replace
            -- them).
            scores := _fb_decide(query, cand.docs, cand.contexts, cand.sims, cand.segments, cardinality(segs),
                                 decision);
            picked := _fb_rank_notes(
                CASE WHEN min_score IS NOT NULL THEN scores
                     ELSE ARRAY(SELECT CASE WHEN scores[i] >= CASE WHEN btrim(cand.contexts[i]) <> ''
                                                                   THEN coalesce((decision ->> 'threshold_context')::real,
                                                                                 (decision ->> 'threshold')::real)
                                                                   ELSE (decision ->> 'threshold')::real END
                                            THEN scores[i] END
                                  FROM generate_subscripts(scores, 1) i ORDER BY i) END,
                cand.created, coalesce(min_score, 0), NULL, 0,
                least(coalesce(final_k, (decision ->> 'max_notes')::integer), candidate_k));
        END IF;
    ELSE
        SELECT array_agg(c.id ORDER BY c.n) AS ids,
               array_agg(c.lesson ORDER BY c.n) AS lessons,
               array_agg(c.correction ORDER BY c.n) AS corrections,
               array_agg(c.lesson || ' ' || c.correction ORDER BY c.n) AS passages,
               array_agg(c.similarity ORDER BY c.n) AS sims,
               array_agg(c.created_at ORDER BY c.n) AS created
          INTO cand
          FROM _fb_first_stage(query, q, tt, candidate_k, key) WITH ORDINALITY AS c(id, lesson, correction, similarity,
                                                                                      created_at, fused, source, n);
        IF cand.ids IS NOT NULL THEN
            -- A caller's min_score is a ranking mode: notes at or above it in score order, up to final_k, with no
            -- relative cut and, when reranking, every candidate scored.
            IF use_rerank THEN
                -- The cross-encoder reads lesson and correction together, and only the candidates the first stage
                -- cannot settle (pg_feedback.selective_rerank); the others are not returned.
                scores := _fb_rerank_selective(query, cand.passages, cand.sims, s.selective AND min_score IS NULL,
                                               s.rerank_max_pairs, s.rerank_min_cosine, s.rerank_cosine_gap,
                                               s.rerank_stage, s.rerank_decided, s.rerank_decided_gap);
                picked := _fb_rank_notes(scores, cand.created, coalesce(min_score, s.rerank_floor),
                                         CASE WHEN min_score IS NULL THEN s.relative_cut END,
                                         s.rerank_tie_margin, least(coalesce(final_k, s.max_notes), candidate_k));
            ELSE
                scores := cand.sims;
                picked := _fb_rank_notes(scores, cand.created, coalesce(min_score, s.cosine_floor),
                                         CASE WHEN min_score IS NULL THEN s.cosine_relative_cut END,
                                         s.cosine_tie_margin, least(coalesce(final_k, s.cosine_max_notes), candidate_k));
            END IF;
        END IF;
    END IF;
    IF _fb_setting('pg_feedback.log_retrievals')::boolean THEN
        rid := _fb_log_retrieval(query, tt, ARRAY(SELECT cand.ids[i] FROM unnest(picked) AS i),
                                 ARRAY(SELECT scores[i] FROM unnest(picked) AS i), scorer, key,
                                 CASE WHEN use_rerank THEN fb_rerank_model() END);
    END IF;

    RETURN QUERY
    SELECT p.n::integer, cand.ids[p.i], cand.lessons[p.i], cand.corrections[p.i], cand.sims[p.i],
           CASE WHEN scorer <> 'cosine' THEN scores[p.i] END, scorer,
           cand.created[p.i], rid
      FROM unnest(picked) WITH ORDINALITY AS p(i, n)
     ORDER BY p.n;
END $$;
COMMENT ON FUNCTION fb_retrieve(text, text, integer, integer, real, boolean, text) IS
    'The notes that apply to a question or to code under review, best first, or none. A code input (a snippet, a '
    'diff, a config file: _fb_input_kind) is read by the learned decision (_fb_decision: fb_calibrate''s, else the '
    'shipped one): embedded whole and in segments (a diff''s post-image, windows of lines) in one call, each '
    'candidate scored by the probability that it applies (cosines of the input and its best segment, words of the '
    'note and of its context in the code, rank and gaps; scored_by ''decision'', rerank_score the probability), every note at or above '
    'the decision''s threshold (threshold_context for a note with a context) returned, at most its max_notes. A question: embeds the query (cached per backend), takes the '
    'candidate_k nearest active notes of the task_type (fused with full-text matches when pg_feedback.hybrid is '
    'on), reranks the candidates the first stage cannot settle with the cross-encoder (unless rerank => false, '
    'pg_feedback.rerank = off, no pg_feedback.rerank_model, or the task_type''s calibration found that reranking '
    'does not pay off), keeps those scoring at least min_score (default: the calibrated floor) and within the '
    'relative cut of the best (none when min_score is given: a ranking mode, every candidate reranked), and returns '
    'at most final_k (default: the calibrated max_notes); between notes within the '
    'near-tie margin of the score that ranked them, the newer first. Settings: feedback_retrieval_settings, then '
    'pg_feedback.*. scored_by says which score ranked; retrieval_id is the feedback_retrievals row when '
    'pg_feedback.log_retrievals is on (for fb_judge). model => a model held in the standby slot (fb_reembed) '
    'searches its vectors instead, to try it before fb_switch_model.';

-- Evaluation per kind of input (a new result column: dropped and created again), calibration of the decision.
DROP FUNCTION fb_eval(integer, boolean, text, text);
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
CREATE OR REPLACE FUNCTION fb_calibrate(split text DEFAULT 'tune', lambda real DEFAULT 0.5, per_task_type boolean DEFAULT true,
                             min_questions integer DEFAULT 50, tolerance real DEFAULT 0,
                             apply boolean DEFAULT true)
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
               'query', g.query, 'n_segments', cardinality(v.segs),
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
     CROSS JOIN LATERAL (SELECT _fb_segments(g.query) AS segs) s
     CROSS JOIN LATERAL (SELECT s.segs, fb_embed_batch(ARRAY[g.query] || s.segs, true, key) AS vectors) v
      LEFT JOIN _fb_golden_grades(fb_calibrate.split) gr ON gr.golden_id = g.id
     WHERE _fb_input_kind(g.query) = 'code';
    IF data IS NULL AND code_data IS NULL THEN
        RAISE EXCEPTION 'feedback_golden has no % questions', coalesce(split, 'golden')
            USING ERRCODE = 'no_data_found',
                  HINT = 'Insert golden questions (split tune) and grade their notes before calibrating.';
    END IF;
    IF code_data IS NOT NULL THEN
        decision := _fb_fit_decision(code_data, max_notes => 5, embedding_model => key);
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
COMMENT ON FUNCTION fb_calibrate(text, real, boolean, integer, real, boolean) IS
    'Chooses fb_retrieve''s settings on the golden questions of a split (default tune): scores every question''s '
    '20 first-stage candidates with the cross-encoder once, then for cross-encoder and cosine ranking picks the '
    'floor, relative cut and most notes that maximise (lessons found - lambda x irrelevant notes injected) / '
    'questions (lambda: what one misleading note costs, in found lessons; default 0.5), per task_type with at '
    'least min_questions questions and for all (''*''); reranks a task_type only where that beats cosine; picks '
    'the cheapest selective-reranking bounds (fewest pairs at the 95th percentile, then on average) whose '
    'recall@3 and precision stay within tolerance of reranking every candidate, and the near-tie margins. With '
    'apply (default) it replaces the rows of feedback_retrieval_settings. Returns the chosen cut and its numbers '
    'per row (of the scorer the row uses). Prose questions choose these; code inputs (_fb_input_kind) fit the '
    'learned decision instead (_fb_fit_decision: logistic regression over each candidate''s features, the '
    'threshold that maximises the worst of applicable notes injected, injected notes that apply and clean inputs '
    'left empty, at most 5 notes), stored on the ''*'' row (decision) and reported as row ''(code)'' (recall_at_3: '
    'applicable notes injected; precision: injected notes that apply; no_answer_correct: clean inputs left empty). '
    'Report on the other split with fb_eval(split => ''test'').';
CREATE OR REPLACE FUNCTION fb_switch_model(model text, force boolean DEFAULT false)
    RETURNS TABLE (previous_model text, active_model text, caught_up integer, recall_before real, recall_after real,
                   writers_blocked interval)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_variable
DECLARE
    k text := _fb_resolve_model(model);
    old text;
    target smallint;
    before_recall real;
    after_recall real;
    missing bigint;
    locked_at timestamptz;
    caught integer := 0;
    after_id bigint := 0;
    step record;
BEGIN
    IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
        RAISE EXCEPTION 'only a superuser may switch the embedding model'
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Every note and query must move to the new vector space at once: ask a superuser.';
    END IF;
    IF k = _fb_active_model() THEN
        RAISE NOTICE 'model % is already the active one', k;
        RETURN QUERY SELECT k, k, 0, NULL::real, NULL::real, interval '0';
        RETURN;
    END IF;
    target := _fb_slot_of(k);
    SELECT count(*) INTO missing FROM feedback_notes n
     WHERE n.status <> 'purged' AND NOT _fb_has_vector(n, target, k);
    IF target IS NULL OR missing > 1000 THEN
        RAISE EXCEPTION 'model % is not re-embedded yet (% notes without its vectors)', k, coalesce(missing, -1)
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = format('CALL fb_reembed(%L) first, then switch.', model);
    END IF;
    IF EXISTS (SELECT 1 FROM feedback_golden) THEN
        SELECT e.recall_at_k INTO before_recall FROM fb_eval(3, false) e WHERE e.kind = '(all)';
        SELECT e.recall_at_k INTO after_recall FROM fb_eval(3, false, k) e WHERE e.kind = '(all)';
        IF after_recall < before_recall AND NOT coalesce(force, false) THEN
            RAISE EXCEPTION 'switching to % would lower recall@3 on feedback_golden from % to %', k,
                            round(before_recall::numeric, 3), round(after_recall::numeric, 3)
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Check the golden questions, or switch anyway with force => true.';
        END IF;
    END IF;
    -- From here writers wait (readers do not): the slots are locked as fb_reembed locks them, and checked again.
    LOCK TABLE feedback_notes IN SHARE ROW EXCLUSIVE MODE;
    locked_at := clock_timestamp();
    PERFORM 1 FROM feedback_embedding_slots s ORDER BY s.slot FOR UPDATE;
    old := _fb_active_model();
    IF _fb_slot_of(k) IS DISTINCT FROM target OR target = _fb_active_slot() THEN
        RAISE EXCEPTION 'the slots changed while fb_switch_model checked model %', k
            USING ERRCODE = 'serialization_failure', HINT = 'Run fb_switch_model again.';
    END IF;
    LOOP
        SELECT * INTO step FROM _fb_reembed_step(NULL, k, target, after_id, 1000);
        EXIT WHEN step.done = 0;
        caught := caught + step.written;
        after_id := step.last_id;
    END LOOP;
    UPDATE feedback_embedding_slots s SET active = false WHERE s.active;
    UPDATE feedback_embedding_slots s SET active = true, assigned_at = now(), assigned_by = _fb_actor()
     WHERE s.slot = target;
    INSERT INTO feedback_audit (actor, action, reason, detail)
    VALUES (_fb_actor(), 'switch_model', CASE WHEN force THEN 'forced' END,
            jsonb_build_object('from', old, 'to', k, 'caught_up', caught, 'recall_before', before_recall,
                               'recall_after', after_recall));
    RETURN QUERY SELECT old, k, caught, before_recall, after_recall, clock_timestamp() - locked_at;
END $$;
COMMENT ON FUNCTION fb_switch_model(text, boolean) IS
    'Superuser: makes a model that fb_reembed put in the standby slot the active one for retrieval, dedup and new '
    'notes. Refuses when recall@3 on feedback_golden would drop (force => true switches anyway). Writers wait '
    'while it embeds the notes stored since the re-embed (writers_blocked says how long); readers never wait.';

-- Privileges, as sql/security.sql gives them.
REVOKE ALL ON FUNCTION _fb_input_kind(text), _fb_segments(text), _fb_shipped_decision(),
    _fb_decide(text, text[], text[], real[], real[], integer, jsonb), _fb_fit_decision(jsonb, integer, text),
    _fb_decision(text), _fb_code_candidates(text, vector[], text, integer, text),
    fb_eval(integer, boolean, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION fb_ingest(text, text, text, text, text, text, text), fb_ingest_batch(fb_note_input[], text, text[])
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fb_ingest(text, text, text, text, text, text, text), fb_ingest_batch(fb_note_input[], text, text[])
    TO feedback_writer;
GRANT EXECUTE ON FUNCTION fb_eval(integer, boolean, text, text),
    _fb_input_kind(text), _fb_segments(text), _fb_code_candidates(text, vector[], text, integer, text),
    _fb_fit_decision(jsonb, integer, text), _fb_decision(text), _fb_shipped_decision()
TO feedback_reviewer;

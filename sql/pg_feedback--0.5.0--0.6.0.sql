-- pg_feedback 0.5.0 -> 0.6.0: holds against an attacker who has read the code (issue 18's red-team findings).
-- Readers see other tenants' notes through nothing (feedback_active_notes filters in a function before any row is
-- returned); retrieval, prompt assembly and the duplicate lookup run with the extension owner's rights, so readers
-- and writers hold no internal function of the write or retrieval path; task_type and source are redacted and
-- every redaction recorded; pending reports never outlive their transaction; a reviewer's restored rows get a
-- complete audit row each; fb_notes_by and fb_purge_by find and retire what one role stored. Nothing stored
-- changes.
\echo Use "ALTER EXTENSION pg_feedback UPDATE TO '0.6.0'" to load this file. \quit


-- F1: tenant isolation that EXPLAIN and leakproof operators cannot see through
CREATE FUNCTION _fb_visible_notes()
    RETURNS TABLE (id bigint, task_type text, tenant text, lesson text, correction text, embedding vector(384),
                   embedding_model text, source text, created_at timestamptz, updated_at timestamptz,
                   report_count integer, content_hash text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    tenants text[] := _fb_my_tenants();
BEGIN
    RETURN QUERY
    SELECT n.id, n.task_type, n.tenant, n.lesson, n.correction,
           -- Spelled out rather than _fb_vector: a function with a SET clause is never inlined.
           CASE WHEN a.slot = 1 AND n.embedding_model = a.model THEN n.embedding
                WHEN a.slot = 2 AND n.embedding_alt_model = a.model THEN n.embedding_alt END,
           a.model, n.source, n.created_at, n.updated_at, n.report_count, n.content_hash
      FROM feedback_notes n
     CROSS JOIN _fb_active() a
     WHERE n.status = 'active' AND (n.tenant IS NULL OR n.tenant = ANY (tenants));
END $$;
COMMENT ON FUNCTION _fb_visible_notes() IS
    'Internal: the active notes the acting role may read (shared ones and its tenants''), filtered before any row '
    'is returned; what feedback_active_notes shows.';

CREATE OR REPLACE VIEW feedback_active_notes AS
SELECT v.id, v.task_type, v.tenant, v.lesson, v.correction, v.embedding, v.embedding_model, v.source, v.created_at,
       v.updated_at, v.report_count, v.content_hash
  FROM _fb_visible_notes() v;
ALTER VIEW feedback_active_notes RESET (security_barrier);

COMMENT ON VIEW feedback_active_notes IS
    'Active notes visible to the current user: shared ones (tenant NULL) and those of tenant roles it is a member '
    'of, with their vector of the active model (NULL until re-embedded when another model computed it). Rows of '
    'other tenants are filtered out before the caller''s conditions run, so no query or EXPLAIN over the view '
    'learns anything of them. Retrieval reads the same notes.';


-- The write path: cleaning (task_type and source redacted, redactions recorded), triggers as the owner
CREATE FUNCTION "_fb_clean_field"(
	"field" TEXT,
	"value" TEXT
) RETURNS TABLE (
	"text" TEXT,
	"kinds" TEXT[],
	"screening" jsonb
)
STRICT STABLE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', '_fb_clean_field_wrapper';

COMMENT ON FUNCTION _fb_clean_field(text, text) IS
    'Internal: one field a note stores apart from _fb_clean_note (its source), redacted and screened in one call: '
    'the text, the kinds of secret replaced, the findings tagged with the field.';

CREATE OR REPLACE FUNCTION _fb_cleaned(n feedback_notes) RETURNS feedback_notes
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    c record;
    s record;
BEGIN
    SELECT * INTO c FROM _fb_clean_note(n.task_type, n.wrong_answer, n.correction, n.lesson, n.tenant);
    SELECT * INTO s FROM _fb_clean_field('source', n.source);   -- NULL source: no row, s stays NULL
    n.content_hash := c.content_hash;
    n.task_type := c.task_type;
    n.wrong_answer := c.wrong_answer;
    n.correction := c.correction;
    n.lesson := c.lesson;
    n.tenant := c.tenant;
    n.source := s.text;
    n.screening := c.screening || coalesce(s.screening, '[]');
    n.redactions := ARRAY(SELECT DISTINCT k FROM unnest(c.redactions || s.kinds) k WHERE k IS NOT NULL ORDER BY k);
    RETURN n;
END $$;
COMMENT ON FUNCTION _fb_cleaned(feedback_notes) IS 'Internal: a note as the server stores it (see _fb_clean_note).';

CREATE OR REPLACE FUNCTION _fb_source(source text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN coalesce(nullif(_fb_normalize(source), ''), 'review_ui');
COMMENT ON FUNCTION _fb_source(text) IS 'Internal: a cleaned source as stored (normalised, review_ui when blank).';

CREATE OR REPLACE FUNCTION _fb_notes_before_insert() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    review text := _fb_review_mode();
    restore text := _fb_restoring(NEW.content_hash);
    cleaned feedback_notes;
    active record;
BEGIN
    IF restore IS NOT NULL THEN
        -- A reviewer (not a superuser) restores only notes of its own tenants.
        IF NEW.tenant IS NOT NULL AND NOT _fb_tenant_allowed(NEW.tenant) THEN
            RAISE EXCEPTION 'role "%" may not restore notes of tenant "%"', _fb_actor(), NEW.tenant
                USING ERRCODE = 'insufficient_privilege',
                      HINT = 'Restore as a superuser, or as a member of the tenant role.';
        END IF;
        NEW.task_type := _fb_task_type(NEW.task_type);   -- a no-op on dumped rows; refuses a blank one
        -- Only what is missing is computed: an id, a content hash, a vector (never for a purged note). A reviewer's
        -- rows get the server's id and hash: ids and hashes are what other rows and re-submissions rely on.
        IF restore = 'reviewer' OR NEW.id IS NULL THEN
            NEW.id := _fb_next_note_id();
        END IF;
        IF restore = 'reviewer' OR NEW.content_hash IS NULL THEN
            NEW.content_hash := fb_content_hash(NEW.task_type, NEW.lesson, NEW.correction, NEW.tenant);
        END IF;
        IF NEW.embedding IS NULL OR NEW.embedding_model IS NULL THEN
            NEW.embedding := NULL;
            NEW.embedding_model := NULL;
        END IF;
        IF NEW.embedding_alt IS NULL OR NEW.embedding_alt_model IS NULL THEN
            NEW.embedding_alt := NULL;
            NEW.embedding_alt_model := NULL;
        END IF;
        IF NEW.embedding IS NULL AND NEW.embedding_alt IS NULL AND NEW.status <> 'purged' THEN
            SELECT * INTO active FROM _fb_lock_active_model();   -- pins the model if this is the first vector
            NEW := _fb_with_vector(NEW, active.slot,
                                   (fb_embed_batch(ARRAY[fb_document_text(NEW.task_type, NEW.lesson)], false,
                                                   active.model))[1], active.model);
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.tenant IS NOT NULL AND NOT _fb_tenant_allowed(NEW.tenant) THEN
        RAISE EXCEPTION 'role "%" may not write notes of tenant "%"', _fb_actor(), NEW.tenant
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'A note''s tenant must be a role you are a member of, or NULL for a shared note.';
    END IF;
    IF _fb_on_conflict_do_nothing(TG_RELID) THEN
        -- INSERT ... ON CONFLICT DO NOTHING: no report is counted here; a row whose content is stored meets it at
        -- content_hash and Postgres skips it.
        cleaned := _fb_cleaned(NEW);
    ELSE
        cleaned := _fb_resubmit(NEW);
        IF cleaned IS NULL THEN
            RETURN NULL;   -- counted on the stored note; no new row
        END IF;
    END IF;
    NEW := cleaned;
    NEW.source := _fb_source(NEW.source);
    -- Server-set fields: whatever the client sent is replaced. No vector yet: the AFTER trigger embeds the new
    -- rows (a row without any vector model is how it tells them from restored rows).
    NEW.id := _fb_next_note_id();
    NEW.embedding := NULL;
    NEW.embedding_model := NULL;
    NEW.embedding_alt := NULL;
    NEW.embedding_alt_model := NULL;
    NEW.created_by := _fb_actor();
    NEW.created_at := now();
    NEW.updated_at := now();
    NEW.report_count := 1;
    NEW.status := CASE WHEN review = 'all' OR (review = 'flagged' AND jsonb_array_length(NEW.screening) > 0)
                       THEN 'pending' ELSE 'active' END;
    RETURN NEW;
END $$;
COMMENT ON FUNCTION _fb_notes_before_insert() IS
    'Trigger: cleans a new note (redaction, screening, content hash), sets every server-owned field (id too), and '
    'turns a re-submission into a counted report (not under INSERT ... ON CONFLICT DO NOTHING, which skips it). A '
    'row restored by a superuser or reviewer (it carries its '
    'content_hash, or pg_feedback.restore_mode) is kept as sent.';

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
               (array_agg(p.source ORDER BY p.ord DESC) FILTER (WHERE p.source IS NOT NULL))[1] AS source
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

CREATE OR REPLACE FUNCTION _fb_notes_after_insert() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    chunk record;
    actor text := _fb_actor();
    new_ids bigint[];
    restored bigint;
    model text;
    slot smallint;
    chunk_bytes bigint := greatest(_fb_setting('pg_feedback.max_call_bytes')::bigint
                                   - _fb_setting('pg_feedback.max_input_bytes')::bigint, 1);
BEGIN
    SELECT array_agg(i.id ORDER BY i.id) FILTER (WHERE i.embedding_model IS NULL AND i.embedding_alt_model IS NULL
                                                    AND i.status IN ('active', 'pending')),
           count(*) FILTER (WHERE NOT (i.embedding_model IS NULL AND i.embedding_alt_model IS NULL
                                       AND i.status IN ('active', 'pending')))
      INTO new_ids, restored
      FROM inserted_notes i;
    -- A superuser's restore writes no audit row: it brings back the audit trail as it was dumped (and its id
    -- sequence after the rows), so a row written here would collide with one still to come. A reviewer cannot
    -- restore the audit trail, and its loads are audited.
    IF restored > 0 AND _fb_restoring('') = 'reviewer' THEN
        -- One complete row per restored note: which note, its content hash and the status it came back with.
        INSERT INTO feedback_audit (actor, action, note_id, content_hash, new_status, reason, detail)
        SELECT actor, 'restore', i.id, i.content_hash, i.status,
               'row stored as sent by a reviewer (pg_feedback.restore_mode)',
               jsonb_build_object('rows', restored, 'created_by', i.created_by, 'source', i.source)
          FROM inserted_notes i
         WHERE NOT (i.embedding_model IS NULL AND i.embedding_alt_model IS NULL AND i.status IN ('active', 'pending'))
         ORDER BY i.id;
    ELSIF restored > 0 THEN
        PERFORM setval('feedback_notes_id_seq', m)
           FROM (SELECT max(i.id) AS m FROM inserted_notes i) x
          WHERE m > coalesce(pg_sequence_last_value('feedback_notes_id_seq'), 0);
    END IF;
    IF new_ids IS NOT NULL THEN
        SELECT a.slot, a.model INTO slot, model FROM _fb_lock_active_model() a;
        -- Chunks of at most 1024 rows and, for a writer, at most pg_feedback.max_call_bytes of text (less one
        -- text's worth), so that a bulk load never trips the per-call cap meant for single calls.
        FOR chunk IN
            SELECT array_agg(id) AS ids, array_agg(doc) AS docs
              FROM (SELECT d.id, d.doc, d.n / 1024 AS part,
                           (sum(octet_length(d.doc)) OVER (ORDER BY d.n) - 1) / chunk_bytes AS bytes_part
                      FROM (SELECT i.id, fb_document_text(i.task_type, i.lesson) AS doc,
                                   row_number() OVER (ORDER BY i.id) AS n
                              FROM inserted_notes i WHERE i.id = ANY (new_ids)) d) s
             GROUP BY part, bytes_part
             ORDER BY part, bytes_part
        LOOP
            -- Embed in its own step: inside the UPDATE, the planner's row estimate for unnest() would evaluate
            -- the STABLE call once at plan time and the executor again, running the model twice.
            PERFORM _fb_store_vectors(chunk.ids, fb_embed_batch(chunk.docs, false, model), slot, model);
        END LOOP;
    END IF;
    -- The near-duplicate locks of every (tenant, task_type) this statement adds to or counts a report on, in one
    -- sorted pass, before any row lock on a stored note (re-submissions counted, merges): concurrent ingests
    -- then take their locks in the same order and never deadlock.
    PERFORM _fb_lock_dedup(array_agg(k.tenant), array_agg(k.task_type))
       FROM (SELECT coalesce(i.tenant, '') AS tenant, i.task_type FROM inserted_notes i
              WHERE i.id = ANY (new_ids) AND i.status = 'active'
             UNION
             SELECT coalesce(p.tenant, ''), p.task_type FROM feedback_pending_reports p
              WHERE p.xid = pg_current_xact_id()) k
    HAVING count(*) > 0;
    PERFORM _fb_count_reports();
    IF new_ids IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO feedback_audit (actor, action, note_id, content_hash, new_status, reason, detail)
    SELECT actor, 'hold', i.id, i.content_hash, 'pending',
           CASE WHEN jsonb_array_length(i.screening) > 0 THEN 'flagged by fb_screen'
                ELSE 'pg_feedback.review = all' END,
           jsonb_build_object('rules', (SELECT coalesce(jsonb_agg(DISTINCT f ->> 'rule'), '[]')
                                          FROM jsonb_array_elements(i.screening) f))
      FROM inserted_notes i
     WHERE i.id = ANY (new_ids) AND i.status = 'pending';
    PERFORM _fb_merge_near_duplicates(array_agg(i.id ORDER BY i.id))
       FROM inserted_notes i WHERE i.id = ANY (new_ids) AND i.status = 'active';
    RETURN NULL;
END $$;
COMMENT ON FUNCTION _fb_notes_after_insert() IS
    'Trigger: embeds the new rows of an INSERT or COPY in batched model runs in the same transaction, audits held '
    'notes and merges near-duplicates; moves the id sequence past restored rows.';

CREATE OR REPLACE FUNCTION fb_ingest_batch(notes fb_note_input[], tenant text DEFAULT NULL)
    RETURNS TABLE (id bigint, action text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_column
DECLARE
    inserted text[];
BEGIN
    -- RETURNING lists the rows this INSERT really added: a re-submission of a stored note is turned into a
    -- counted report by the insert trigger and is not returned. Two sessions inserting the same new note at once
    -- meet at the content hash: the loser's whole INSERT is rolled back to its savepoint and run again, and then
    -- finds the winner's row and counts a report on it. Rows go in in content order, so two batches that share
    -- several new notes meet at the first of them and never deadlock at the content-hash index.
    FOR attempt IN 1..3 LOOP
        BEGIN
            WITH ins AS (
                INSERT INTO feedback_notes AS f (task_type, wrong_answer, correction, lesson, source, tenant)
                SELECT n.task_type, coalesce(n.wrong_answer, ''), n.correction, n.lesson, n.source, fb_ingest_batch.tenant
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
COMMENT ON FUNCTION fb_ingest_batch(fb_note_input[], text) IS
    'Stores many notes with one INSERT (embedded in batched model runs), all of one tenant (NULL: shared). Returns, '
    'in input order, each note''s id and action: inserted; pending when it waits for a reviewer (flagged by '
    'fb_screen, or pg_feedback.review = all); merged when it was folded into a near-duplicate (the id is then the '
    'existing note''s); for the same correction already stored (or repeated in the batch), a counted report: updated '
    'when that note is active, else its status (deprecated, pending, rejected, purged), which a report never changes.';


-- Retrieval with the owner's rights
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
    q := (fb_embed_batch(ARRAY[query], true, key))[1];
    IF model IS NOT NULL AND _fb_slot_of(key) IS NULL THEN
        RAISE EXCEPTION 'no note is embedded with model "%"', model
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = format('CALL fb_reembed(%L) (superuser) embeds the notes with it first; SELECT * FROM '
                                'feedback_embedding_slots shows which models hold vectors.', model);
    END IF;
    tt := _fb_task_type(fb_retrieve.task_type);
    SELECT * INTO s FROM _fb_settings(tt, key);
    use_rerank := coalesce(rerank, s.rerank) AND fb_rerank_model() <> '';
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
        IF use_rerank THEN
            -- The cross-encoder reads lesson and correction together, and only the candidates the first stage
            -- cannot settle (pg_feedback.selective_rerank); the others are not returned.
            scores := _fb_rerank_selective(query, cand.passages, cand.sims, s.selective, s.rerank_max_pairs,
                                           s.rerank_min_cosine, s.rerank_cosine_gap, s.rerank_stage, s.rerank_decided,
                                           s.rerank_decided_gap);
            picked := _fb_rank_notes(scores, cand.created, coalesce(min_score, s.rerank_floor), s.relative_cut,
                                     s.rerank_tie_margin, least(coalesce(final_k, s.max_notes), candidate_k));
        ELSE
            scores := cand.sims;
            picked := _fb_rank_notes(scores, cand.created, coalesce(min_score, s.cosine_floor), s.cosine_relative_cut,
                                     s.cosine_tie_margin, least(coalesce(final_k, s.cosine_max_notes), candidate_k));
        END IF;
    END IF;
    IF _fb_setting('pg_feedback.log_retrievals')::boolean THEN
        rid := _fb_log_retrieval(query, tt, ARRAY(SELECT cand.ids[i] FROM unnest(picked) AS i),
                                 ARRAY(SELECT scores[i] FROM unnest(picked) AS i),
                                 CASE WHEN use_rerank THEN 'cross-encoder' ELSE 'cosine' END, key,
                                 CASE WHEN use_rerank THEN fb_rerank_model() END);
    END IF;

    RETURN QUERY
    SELECT p.n::integer, cand.ids[p.i], cand.lessons[p.i], cand.corrections[p.i], cand.sims[p.i],
           CASE WHEN use_rerank THEN scores[p.i] END,
           CASE WHEN use_rerank THEN 'cross-encoder' ELSE 'cosine' END,
           cand.created[p.i], rid
      FROM unnest(picked) WITH ORDINALITY AS p(i, n)
     ORDER BY p.n;
END $$;
COMMENT ON FUNCTION fb_retrieve(text, text, integer, integer, real, boolean, text) IS
    'The notes that apply to a question, best first, or none. Embeds the query (cached per backend), takes the '
    'candidate_k nearest active notes of the task_type (fused with full-text matches when pg_feedback.hybrid is '
    'on), reranks the candidates the first stage cannot settle with the cross-encoder (unless rerank => false, '
    'pg_feedback.rerank = off, no pg_feedback.rerank_model, or the task_type''s calibration found that reranking '
    'does not pay off), keeps those scoring at least min_score (default: the calibrated floor) and within the '
    'relative cut of the best, and returns at most final_k (default: the calibrated max_notes); between notes within the '
    'near-tie margin of the score that ranked them, the newer first. Settings: feedback_retrieval_settings, then '
    'pg_feedback.*. scored_by says which score ranked; retrieval_id is the feedback_retrievals row when '
    'pg_feedback.log_retrievals is on (for fb_judge). model => a model held in the standby slot (fb_reembed) '
    'searches its vectors instead, to try it before fb_switch_model.';

CREATE OR REPLACE FUNCTION fb_find_duplicate(task_type text, lesson text)
    RETURNS TABLE (id bigint, lesson text, similarity real, would_merge boolean)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT c.id, c.lesson, (1 - c.distance)::real,
               1 - c.distance >= _fb_setting('pg_feedback.dup_threshold')::double precision
                   AND _fb_setting('pg_feedback.dup_threshold')::double precision < 1
          FROM _fb_candidates(fb_embed(fb_document_text(fb_find_duplicate.task_type, fb_find_duplicate.lesson)),
                              _fb_task_type(fb_find_duplicate.task_type), 1) c
         WHERE _fb_normalize(fb_find_duplicate.lesson) <> '';
    END;
COMMENT ON FUNCTION fb_find_duplicate(text, text) IS
    'The active note of the task_type nearest to a lesson (active model), its cosine similarity, and whether ingesting the lesson '
    'would merge into it (similarity >= pg_feedback.dup_threshold). No row for a NULL or blank lesson.';

CREATE OR REPLACE FUNCTION fb_build_prompt(query text, task_type text,
                                base_instructions text DEFAULT
                                    'You are a careful code reviewer. Apply the lessons from prior reviewer '
                                    'corrections below where they are relevant to the task.',
                                max_context_tokens integer DEFAULT 800)
    RETURNS text
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT _fb_build_prompt(base_instructions,
                                coalesce(array_agg(r.lesson ORDER BY r.rank), '{}'),
                                coalesce(array_agg(r.correction ORDER BY r.rank), '{}'),
                                max_context_tokens)
          FROM fb_retrieve(query, task_type) r;
    END;
COMMENT ON FUNCTION fb_build_prompt(text, text, text, integer) IS
    'A prompt: base_instructions, then the retrieved lessons numbered in rank order inside '
    '<prior_corrections> ... </prior_corrections> (as many as fit max_context_tokens, counted with the embedding '
    'model''s tokenizer over the whole block), then the instruction to treat the block as untrusted reference data. '
    'Angle brackets and look-alikes in note text are escaped so no note can close or reopen the fence. '
    '"(no relevant prior corrections)" when nothing passes the floor.';


-- Finding and retiring what one role stored
CREATE FUNCTION _fb_purge_note(note_id bigint, why text, action text, merges_of text DEFAULT NULL)
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
       SET wrong_answer = '', correction = '[purged]', lesson = '[purged]', embedding = NULL, embedding_model = NULL,
           embedding_alt = NULL, embedding_alt_model = NULL, screening = '[]', status = 'purged', updated_at = now()
     WHERE id = note_id;
    UPDATE feedback_note_merges m SET lesson = '[purged]', correction = '[purged]'
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

CREATE OR REPLACE FUNCTION fb_purge(note_id bigint, reason text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
BEGIN
    -- The texts merged into this note were near-duplicates of it: they go too.
    PERFORM _fb_purge_note(note_id, _fb_require_reason(reason, 'fb_purge'), 'purge');
    RETURN true;
END $$;
COMMENT ON FUNCTION fb_purge(bigint, text) IS
    'Reviewer: removes a note''s text everywhere (the note, and the merge records of reports folded into it) for a '
    'leaked secret; the row stays with status purged so its id and history remain, and an audit row without the '
    'text is kept.';

CREATE FUNCTION fb_notes_by(role text, since timestamptz DEFAULT '-infinity')
    RETURNS TABLE (kind text, note_id bigint, merged_hash text, status text, task_type text, tenant text,
                   lesson text, correction text, source text, at timestamptz)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
BEGIN
    IF role IS NULL OR _fb_normalize(role) = '' OR since IS NULL THEN
        RAISE EXCEPTION 'fb_notes_by needs a role and a moment, not %, %', coalesce(quote_literal(role), 'NULL'),
                        coalesce(since::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'For example fb_notes_by(''app_writer'', now() - interval ''7 days''); since defaults to '
                         'all time.';
    END IF;
    RETURN QUERY
    SELECT 'note', f.id, f.content_hash, f.status, f.task_type, f.tenant, f.lesson, f.correction, f.source,
           f.created_at
      FROM feedback_notes f
     WHERE f.created_by = fb_notes_by.role AND f.created_at >= since AND _fb_tenant_allowed(f.tenant)
    UNION ALL
    SELECT 'merged', m.into_id, m.merged_hash, t.status, m.task_type, t.tenant, m.lesson, m.correction, m.source,
           m.merged_at
      FROM feedback_note_merges m JOIN feedback_notes t ON t.id = m.into_id
     WHERE m.merged_by = fb_notes_by.role AND m.merged_at >= since AND _fb_tenant_allowed(t.tenant)
     ORDER BY 10, 2;
END $$;
COMMENT ON FUNCTION fb_notes_by(text, timestamptz) IS
    'Reviewer: what one role stored since a moment (default: ever), in time order: its notes (kind note, any '
    'status) and its reports merged into other notes (kind merged: note_id is the note it was folded into). Only '
    'notes of the caller''s tenants and shared ones. fb_purge_by retires all of it.';

CREATE FUNCTION fb_purge_by(role text, since timestamptz, reason text)
    RETURNS TABLE (kind text, note_id bigint, merged_hash text, old_status text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_column
DECLARE
    why text := _fb_require_reason(reason, 'fb_purge_by');
    r record;
    notes integer := 0;
    merged integer := 0;
BEGIN
    IF role IS NULL OR _fb_normalize(role) = '' OR since IS NULL THEN
        RAISE EXCEPTION 'fb_purge_by needs a role and a moment, not %, %', coalesce(quote_literal(role), 'NULL'),
                        coalesce(since::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'List first with fb_notes_by(role, since); use ''-infinity'' for all time.';
    END IF;
    FOR r IN SELECT * FROM fb_notes_by(fb_purge_by.role, fb_purge_by.since) b WHERE b.status <> 'purged' OR b.kind = 'merged'
    LOOP
        IF r.kind = 'note' THEN
            PERFORM _fb_purge_note(r.note_id, why, 'purge_by', merges_of => fb_purge_by.role);
            notes := notes + 1;
        ELSIF r.lesson <> '[purged]' THEN
            UPDATE feedback_note_merges m SET lesson = '[purged]', correction = '[purged]'
             WHERE m.merged_hash = r.merged_hash AND m.into_id = r.note_id AND m.merged_by = fb_purge_by.role;
            INSERT INTO feedback_audit (actor, action, note_id, content_hash, reason, detail)
            VALUES (_fb_actor(), 'purge_by_merged', r.note_id, r.merged_hash, why,
                    jsonb_build_object('merged_by', fb_purge_by.role));
            merged := merged + 1;
        ELSE
            CONTINUE;
        END IF;
        kind := r.kind;
        note_id := r.note_id;
        merged_hash := r.merged_hash;
        old_status := r.status;
        RETURN NEXT;
    END LOOP;
    INSERT INTO feedback_audit (actor, action, reason, detail)
    VALUES (_fb_actor(), 'purge_by', why,
            jsonb_build_object('role', fb_purge_by.role, 'since', fb_purge_by.since, 'notes', notes,
                               'merge_records', merged));
END $$;
COMMENT ON FUNCTION fb_purge_by(text, timestamptz, text) IS
    'Reviewer: retires everything one role stored since a moment (see fb_notes_by): its notes are purged (text '
    'removed, row and history kept, never retrieved again) and its merged reports lose their text; other roles'' '
    'reports merged into its notes are kept. Returns what it retired; each item and the call are audited.';


-- Screening of every field a prompt or a reviewer shows
COMMENT ON COLUMN feedback_notes.screening IS
    'Screening findings (field, rule, family, severity, span) on every field a prompt or a reviewer shows: '
    'task_type, lesson, correction, wrong_answer, source, and lesson+correction read together.';


-- Privileges: nothing new for PUBLIC; readers and writers lose every internal function of the write and
-- retrieval paths; reviewers get what fb_eval, fb_calibrate, fb_eval_ann and the review queue call as them.
REVOKE ALL ON FUNCTION _fb_visible_notes(), _fb_clean_field(text, text),
                       _fb_purge_note(bigint, text, text, text), fb_notes_by(text, timestamptz),
                       fb_purge_by(text, timestamptz, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION
    _fb_vector(feedback_notes, smallint), _fb_has_vector(feedback_notes, smallint, text),
    _fb_candidates(vector, text, integer, text, text, boolean, text),
    _fb_lexical_candidates(vector, tsquery, text, integer, text), _fb_search_terms(text),
    _fb_first_stage(text, vector, text, integer, text), _fb_settings(text, text),
    _fb_rerank_selective(text, text[], real[], boolean, integer, real, real, integer, real, real),
    _fb_rank_notes(real[], timestamptz[], real, real, real, integer),
    _fb_log_retrieval(text, text, bigint[], real[], text, text, text),
    _fb_build_prompt(text, text[], text[], integer),
    _fb_my_tenants(), _fb_actor(), _fb_task_type(text)
FROM feedback_reader;
REVOKE EXECUTE ON FUNCTION
    _fb_clean_note(text, text, text, text, text), _fb_cleaned(feedback_notes), _fb_source(text),
    _fb_resubmit(feedback_notes), _fb_next_note_id(), _fb_pin_model(), _fb_lock_active_model(),
    _fb_with_vector(feedback_notes, smallint, vector, text),
    _fb_ingest_outcomes(text[]),
    _fb_tenant_allowed(text), _fb_restoring(text), _fb_review_mode(), _fb_restore_mode(),
    _fb_on_conflict_do_nothing(oid)
FROM feedback_writer;
GRANT EXECUTE ON FUNCTION _fb_visible_notes() TO feedback_reader;
GRANT EXECUTE ON FUNCTION
    fb_notes_by(text, timestamptz), fb_purge_by(text, timestamptz, text),
    _fb_vector(feedback_notes, smallint), _fb_has_vector(feedback_notes, smallint, text),
    _fb_candidates(vector, text, integer, text, text, boolean, text),
    _fb_lexical_candidates(vector, tsquery, text, integer, text), _fb_search_terms(text),
    _fb_first_stage(text, vector, text, integer, text), _fb_settings(text, text),
    _fb_my_tenants(), _fb_actor(), _fb_task_type(text), _fb_tenant_allowed(text)
TO feedback_reviewer;


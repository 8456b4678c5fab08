-- pg_feedback: the notes table, its triggers and the ingest API.
-- Internal helpers start with "_fb_"; everything a user calls starts with "fb_".

------------------------------------------------------------------------------------------------------------------
-- Notes
------------------------------------------------------------------------------------------------------------------

CREATE SEQUENCE feedback_notes_id_seq;

CREATE TABLE feedback_notes (
    id                   bigint PRIMARY KEY,
    content_hash         text NOT NULL,
    task_type            text NOT NULL,
    wrong_answer         text NOT NULL DEFAULT '',
    correction           text NOT NULL,
    lesson               text NOT NULL,
    embedding            vector(384),
    embedding_model      text,
    embedding_alt        vector(384),
    embedding_alt_model  text,
    source               text NOT NULL DEFAULT 'review_ui',
    created_by           text NOT NULL DEFAULT session_user,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    report_count         integer NOT NULL DEFAULT 1 CHECK (report_count >= 1),
    status               text NOT NULL DEFAULT 'active'
                         CHECK (status IN ('active', 'deprecated', 'pending', 'rejected', 'purged', 'superseded')),
    tenant               text,
    screening            jsonb NOT NULL DEFAULT '[]',
    redactions           text[] NOT NULL DEFAULT '{}',
    CONSTRAINT feedback_notes_content_hash_key UNIQUE (content_hash),
    search_vector        tsvector GENERATED ALWAYS AS (
                             to_tsvector('pg_catalog.english'::regconfig, lesson || ' ' || correction)) STORED,
    context              text NOT NULL DEFAULT '',
    supersedes           bigint,
    superseded_by        bigint
);
ALTER SEQUENCE feedback_notes_id_seq OWNED BY feedback_notes.id;

CREATE INDEX feedback_notes_embedding_idx ON feedback_notes USING hnsw (embedding vector_cosine_ops);
CREATE INDEX feedback_notes_embedding_alt_idx ON feedback_notes USING hnsw (embedding_alt vector_cosine_ops);
CREATE INDEX feedback_notes_task_type_idx ON feedback_notes (task_type, status);
CREATE INDEX feedback_notes_pending_idx ON feedback_notes (created_at) WHERE status = 'pending';
CREATE INDEX feedback_notes_search_idx ON feedback_notes USING gin (search_vector);

SELECT pg_catalog.pg_extension_config_dump('feedback_notes', '');
SELECT pg_catalog.pg_extension_config_dump('feedback_notes_id_seq', '');

COMMENT ON TABLE feedback_notes IS
    'One reviewer correction per row. id never changes; content_hash (fb_content_hash) makes submitting the same '
    'correction again count a report on the stored row. Secrets are redacted and instructions screened before a '
    'note is stored; flagged notes wait as pending for a reviewer. Notes are never deleted by the API: fb_deprecate '
    'sets status = ''deprecated''. Readers see active notes through feedback_active_notes.';
COMMENT ON COLUMN feedback_notes.id IS 'The note''s identity: set by the server, never changed (also when the note is edited).';
COMMENT ON COLUMN feedback_notes.content_hash IS
    'fb_content_hash(task_type, lesson, correction, tenant) of the stored text; set by the server, follows edits.';
COMMENT ON COLUMN feedback_notes.task_type IS 'Kind of task the lesson applies to (lower case), e.g. sql_injection_scan.';
COMMENT ON COLUMN feedback_notes.wrong_answer IS 'What the model answered (latest report), secrets redacted.';
COMMENT ON COLUMN feedback_notes.correction IS 'What the reviewer said the right answer is, secrets redacted.';
COMMENT ON COLUMN feedback_notes.lesson IS 'The one-line lesson fed back into prompts, secrets redacted.';
COMMENT ON COLUMN feedback_notes.embedding IS
    'Vector slot 1: embedding of "task_type: lesson" by embedding_model, computed by the server.';
COMMENT ON COLUMN feedback_notes.embedding_model IS 'Key (name@sha256 of its weights) of the model that computed embedding.';
COMMENT ON COLUMN feedback_notes.embedding_alt IS
    'Vector slot 2: the same text embedded by embedding_alt_model (fb_reembed fills the slot that is not active).';
COMMENT ON COLUMN feedback_notes.embedding_alt_model IS 'Key of the model that computed embedding_alt.';
COMMENT ON COLUMN feedback_notes.source IS 'Where the latest report came from (provenance), e.g. review_ui, import.';
COMMENT ON COLUMN feedback_notes.created_by IS 'Role that first reported the note (set by the server).';
COMMENT ON COLUMN feedback_notes.created_at IS 'When the note was first stored (set by the server).';
COMMENT ON COLUMN feedback_notes.updated_at IS 'When the note was last reported, edited or changed status (set by the server).';
COMMENT ON COLUMN feedback_notes.report_count IS 'How many times the note was reported (counted by the server).';
COMMENT ON COLUMN feedback_notes.status IS
    'active (retrieved); pending (waits for fb_approve or fb_reject); deprecated (soft-deleted, fb_restore brings it '
    'back); rejected (a reviewer refused it); purged (its text was removed by fb_purge); superseded (a newer note '
    'that revises it went live: superseded_by). Set by the server.';
COMMENT ON COLUMN feedback_notes.supersedes IS
    'The older note this one revises (reverses or changes), found by the comparison at ingest; it supersedes that '
    'note when it goes live (pg_feedback.revisions). Set by the server.';
COMMENT ON COLUMN feedback_notes.superseded_by IS 'The newer note that superseded this one (status superseded).';
COMMENT ON COLUMN feedback_notes.tenant IS
    'The role whose members may retrieve the note; NULL: shared with every reader. Near-duplicates never merge '
    'across tenants.';
COMMENT ON COLUMN feedback_notes.screening IS
    'Screening findings (field, rule, family, severity, span) on every field a prompt or a reviewer shows: '
    'task_type, lesson, correction, wrong_answer, source, and lesson+correction read together.';
COMMENT ON COLUMN feedback_notes.redactions IS 'Kinds of secrets fb_redact replaced when the note was stored.';
CREATE INDEX feedback_notes_supersedes_idx ON feedback_notes (supersedes) WHERE supersedes IS NOT NULL;
COMMENT ON COLUMN feedback_notes.search_vector IS
    'Full-text lexemes of lesson and correction (English), generated; the second candidate source of fb_retrieve '
    'when pg_feedback.hybrid is on.';

-- SECURITY DEFINER: writers need no right on the sequence, and cannot take ids themselves.
CREATE FUNCTION _fb_next_note_id() RETURNS bigint
    LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN nextval('feedback_notes_id_seq');
COMMENT ON FUNCTION _fb_next_note_id() IS 'Internal: the id of a new note (feedback_notes_id_seq).';

CREATE FUNCTION _fb_vector(n feedback_notes, slot smallint) RETURNS vector(384)
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN CASE slot WHEN 1 THEN n.embedding ELSE n.embedding_alt END;
CREATE FUNCTION _fb_has_vector(n feedback_notes, slot smallint, model text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN CASE slot WHEN 1 THEN n.embedding IS NOT NULL AND n.embedding_model IS NOT DISTINCT FROM model
                     ELSE n.embedding_alt IS NOT NULL AND n.embedding_alt_model IS NOT DISTINCT FROM model END;
COMMENT ON FUNCTION _fb_vector(feedback_notes, smallint) IS 'Internal: a note''s vector in a slot.';
COMMENT ON FUNCTION _fb_has_vector(feedback_notes, smallint, text) IS
    'Internal: whether a note''s slot holds a vector computed by a model.';

CREATE FUNCTION _fb_with_vector(n feedback_notes, slot smallint, vec vector, model text) RETURNS feedback_notes
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
BEGIN
    IF slot = 1 THEN
        n.embedding := vec;
        n.embedding_model := model;
    ELSE
        n.embedding_alt := vec;
        n.embedding_alt_model := model;
    END IF;
    RETURN n;
END $$;
COMMENT ON FUNCTION _fb_with_vector(feedback_notes, smallint, vector, text) IS
    'Internal: a note with a vector of a model in a slot.';

-- A skipped note (its embedded text changed since docs) keeps the vector its edit gave it.
CREATE FUNCTION _fb_store_vectors(ids bigint[], vectors vector[], slot smallint, model text, docs text[] DEFAULT NULL)
    RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_variable
DECLARE
    n integer;
BEGIN
    UPDATE feedback_notes f
       SET embedding = CASE WHEN slot = 1 THEN e.v ELSE f.embedding END,
           embedding_model = CASE WHEN slot = 1 THEN model ELSE f.embedding_model END,
           embedding_alt = CASE WHEN slot = 2 THEN e.v ELSE f.embedding_alt END,
           embedding_alt_model = CASE WHEN slot = 2 THEN model ELSE f.embedding_alt_model END
      FROM unnest(ids, vectors, coalesce(docs, array_fill(NULL::text, ARRAY[cardinality(ids)]))) AS e(id, v, doc)
     WHERE f.id = e.id AND e.v IS NOT NULL AND f.status <> 'purged'
       AND (e.doc IS NULL OR fb_document_text(f.task_type, f.lesson) = e.doc);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;
COMMENT ON FUNCTION _fb_store_vectors(bigint[], vector[], smallint, text, text[]) IS
    'Internal: writes vectors of a model into a slot (skipping notes whose embedded text changed since docs).';

-- The share lock on the active slot's row lasts until the transaction ends, so fb_switch_model cannot flip the
-- slot between this read and the write (a writer whose snapshot predates a switch gets a serialization error
-- instead of storing a vector of the old model). SECURITY DEFINER: writers have no UPDATE right on the slots.
CREATE FUNCTION _fb_lock_active_model() RETURNS TABLE (slot smallint, model text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
BEGIN
    PERFORM _fb_pin_model();
    RETURN QUERY SELECT s.slot, s.model FROM feedback_embedding_slots s WHERE s.active FOR SHARE;
END $$;
COMMENT ON FUNCTION _fb_lock_active_model() IS
    'Internal: the active slot and model, pinned if need be and share-locked until the end of the transaction.';

-- A set-returning function in PL/pgSQL filters by tenant before it returns a row: the planner cannot push a
-- caller's qual (even a LEAKPROOF one, such as = or starts_with) below that filter, so neither EXPLAIN (ANALYZE)
-- nor "Rows Removed by Filter" nor a caller's function sees another tenant's rows, not even their number. (A
-- security_barrier view still lets leakproof quals run before its own filter; row-level security on the table
-- would make Postgres refuse COPY FROM for every writer.) SECURITY DEFINER: readers need no right on
-- feedback_notes.
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

CREATE VIEW feedback_active_notes AS
SELECT v.id, v.task_type, v.tenant, v.lesson, v.correction, v.embedding, v.embedding_model, v.source, v.created_at,
       v.updated_at, v.report_count, v.content_hash
  FROM _fb_visible_notes() v;
COMMENT ON VIEW feedback_active_notes IS
    'Active notes visible to the current user: shared ones (tenant NULL) and those of tenant roles it is a member '
    'of, with their vector of the active model (NULL until re-embedded when another model computed it). Rows of '
    'other tenants are filtered out before the caller''s conditions run, so no query or EXPLAIN over the view '
    'learns anything of them. Retrieval reads the same notes.';

-- The settings exist once the library is loaded, which the first call of one of its C functions does: without
-- shared_preload_libraries a session whose first call is a SQL function reading a setting (fb_eval, fb_eval_ann,
-- fb_approve) would otherwise fail with "unrecognized configuration parameter".
CREATE FUNCTION _fb_setting(name text) RETURNS text
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
BEGIN
    IF current_setting(name, true) IS NULL THEN
        PERFORM fb_rerank_model();   -- loads the library, which defines its settings
    END IF;
    RETURN current_setting(name);
END $$;
COMMENT ON FUNCTION _fb_setting(text) IS
    'Internal: current_setting of a pg_feedback setting, loading the library first if this session has not yet.';

CREATE TABLE feedback_note_merges (
    merged_hash  text NOT NULL,
    similarity   real NOT NULL,
    task_type    text NOT NULL,
    lesson       text NOT NULL,
    correction   text NOT NULL,
    source       text NOT NULL,
    merged_by    text NOT NULL DEFAULT session_user,
    merged_at    timestamptz NOT NULL DEFAULT now(),
    into_id      bigint NOT NULL REFERENCES feedback_notes (id),
    context      text NOT NULL DEFAULT '',
    id           bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    wrong_answer text NOT NULL DEFAULT '',
    kind         text NOT NULL DEFAULT 'merge' CHECK (kind IN ('merge', 'resubmission'))
);
CREATE INDEX feedback_note_merges_merged_hash_idx ON feedback_note_merges (merged_hash);
CREATE INDEX feedback_note_merges_into_id_idx ON feedback_note_merges (into_id);
SELECT pg_catalog.pg_extension_config_dump('feedback_note_merges', '');
SELECT pg_catalog.pg_extension_config_dump('feedback_note_merges_id_seq', '');
COMMENT ON TABLE feedback_note_merges IS
    'Provenance of near-duplicate merges: a submitted note (merged_hash = its content hash, its text and source) '
    'that was folded into an existing note (into_id) because fb_compare_notes called it a rewording of that note '
    '(similarity: their cosine); source and merged_by: who reported it. The surviving note keeps its own text and '
    'provenance; context and wrong_answer: the reviewed input and the answer it carried. kind merge: a rewording '
    'folded in; kind resubmission: a re-submission of the note''s own content (same content hash) that differed from '
    'the stored note in its exact text (white space, line breaks) or its wrong answer, source or context, which the '
    'note kept (only the role that stored a note updates those), similarity 1.';

------------------------------------------------------------------------------------------------------------------
-- Audit
------------------------------------------------------------------------------------------------------------------

CREATE TABLE feedback_audit (
    id            bigserial PRIMARY KEY,
    at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    actor         text NOT NULL,
    action        text NOT NULL,
    content_hash  text,
    old_status    text,
    new_status    text,
    reason        text,
    detail        jsonb NOT NULL DEFAULT '{}',
    note_id       bigint
);
CREATE INDEX feedback_audit_note_id_idx ON feedback_audit (note_id);
SELECT pg_catalog.pg_extension_config_dump('feedback_audit', '');
SELECT pg_catalog.pg_extension_config_dump('feedback_audit_id_seq', '');
COMMENT ON TABLE feedback_audit IS
    'Append-only trail of every review and status change, merge, purge, restore and model switch: who (actor), '
    'when, which note (note_id, and its content_hash at the time), old and new status, the reason. It never holds '
    'note text. Only feedback_reviewer reads it; UPDATE, DELETE and TRUNCATE are refused.';

CREATE FUNCTION _fb_audit_append_only() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
BEGIN
    RAISE EXCEPTION 'feedback_audit is append-only'
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'Audit rows are never changed or removed; fb_purge removes a note''s text, not its history.';
END $$;
COMMENT ON FUNCTION _fb_audit_append_only() IS 'Trigger: refuses UPDATE, DELETE and TRUNCATE of feedback_audit.';
CREATE TRIGGER feedback_audit_no_update BEFORE UPDATE OR DELETE ON feedback_audit
    FOR EACH ROW EXECUTE FUNCTION _fb_audit_append_only();
CREATE TRIGGER feedback_audit_no_truncate BEFORE TRUNCATE ON feedback_audit
    FOR EACH STATEMENT EXECUTE FUNCTION _fb_audit_append_only();

------------------------------------------------------------------------------------------------------------------
-- Write path
------------------------------------------------------------------------------------------------------------------

-- Used by the insert and update triggers.
CREATE FUNCTION _fb_cleaned(n feedback_notes) RETURNS feedback_notes
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
COMMENT ON FUNCTION _fb_clean_field(text, text) IS
    'Internal: one field a note stores apart from _fb_clean_note (its source), redacted and screened in one call: '
    'the text, the kinds of secret replaced, the findings tagged with the field.';

-- No redaction here: _fb_cleaned already redacted the source and recorded its redactions.
CREATE FUNCTION _fb_source(source text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN coalesce(nullif(_fb_normalize(source), ''), 'review_ui');
COMMENT ON FUNCTION _fb_source(text) IS 'Internal: a cleaned source as stored (normalised, review_ui when blank).';

-- SECURITY DEFINER, so that writers need EXECUTE on none of the internal functions it calls (the id counter,
-- re-submission, cleaning): a trigger fires whatever the inserting role may execute. Every check still names the
-- caller (_fb_actor).
CREATE FUNCTION _fb_notes_before_insert() RETURNS trigger
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
    NEW.supersedes := NULL;      -- only the comparison links revisions
    NEW.superseded_by := NULL;
    NEW.status := CASE WHEN review = 'all' OR (review = 'flagged' AND jsonb_array_length(NEW.screening) > 0)
                       THEN 'pending' ELSE 'active' END;
    RETURN NEW;
END $$;

-- Also takes the near-duplicate locks and counts the re-submissions the insert trigger noted. Restored rows are
-- those that carry a vector, or are purged.
CREATE FUNCTION _fb_notes_after_insert() RETURNS trigger
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

-- Only the owner and superusers may UPDATE. The id stays, so merges, golden questions and audit rows still point
-- at the note. When the embedded text changed, the other slot's vector is stale and goes (fb_reembed or
-- fb_switch_model recompute it). A change of wrong_answer alone (a counted re-submission) or of the context is
-- only redacted: the identity, screening and vectors stay.
CREATE FUNCTION _fb_notes_before_update() RETURNS trigger
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

CREATE TRIGGER feedback_notes_before_insert BEFORE INSERT ON feedback_notes
    FOR EACH ROW EXECUTE FUNCTION _fb_notes_before_insert();
CREATE TRIGGER feedback_notes_after_insert AFTER INSERT ON feedback_notes
    REFERENCING NEW TABLE AS inserted_notes
    FOR EACH STATEMENT EXECUTE FUNCTION _fb_notes_after_insert();
CREATE TRIGGER feedback_notes_before_update
    BEFORE UPDATE OF task_type, wrong_answer, lesson, correction, tenant, context ON feedback_notes
    FOR EACH ROW EXECUTE FUNCTION _fb_notes_before_update();

COMMENT ON FUNCTION _fb_notes_before_insert() IS
    'Trigger: cleans a new note (redaction, screening, content hash), sets every server-owned field (id too), and '
    'turns a re-submission into a counted report (not under INSERT ... ON CONFLICT DO NOTHING, which skips it). A '
    'row restored by a superuser or reviewer (it carries its '
    'content_hash, or pg_feedback.restore_mode) is kept as sent.';
COMMENT ON FUNCTION _fb_notes_after_insert() IS
    'Trigger: embeds the new rows of an INSERT or COPY in batched model runs in the same transaction, audits held '
    'notes and merges near-duplicates; moves the id sequence past restored rows.';
COMMENT ON FUNCTION _fb_notes_before_update() IS
    'Trigger: re-cleans an edited note (redaction, screening, content hash; the id stays) and re-embeds it when its '
    'embedded text changed.';

------------------------------------------------------------------------------------------------------------------
-- Ingest API
------------------------------------------------------------------------------------------------------------------

CREATE TYPE fb_note_input AS (
    task_type    text,
    wrong_answer text,
    correction   text,
    lesson       text,
    source       text
);
COMMENT ON TYPE fb_note_input IS 'One note for fb_ingest_batch; a NULL source means ''review_ui''.';

-- SECURITY DEFINER: writers cannot read feedback_notes; it reveals only the id and status of content they
-- submitted.
CREATE FUNCTION _fb_ingest_outcomes(hashes text[])
    RETURNS TABLE (content_hash text, id bigint, status text, into_id bigint)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT h.hash, f.id, f.status,
               (SELECT m.into_id FROM feedback_note_merges m JOIN feedback_notes t ON t.id = m.into_id
                 WHERE f.id IS NULL AND m.merged_hash = h.hash AND _fb_tenant_allowed(t.tenant)
                 ORDER BY m.merged_at DESC LIMIT 1)
          FROM (SELECT DISTINCT unnest(hashes) AS hash) h
          LEFT JOIN feedback_notes f ON f.content_hash = h.hash AND _fb_tenant_allowed(f.tenant);
    END;
COMMENT ON FUNCTION _fb_ingest_outcomes(text[]) IS
    'Internal: for content hashes, the stored note''s id and status, or the note it was merged into.';

-- SECURITY DEFINER so that it can learn which rows its INSERT created (RETURNING) while writers have no SELECT
-- on feedback_notes; the triggers act for the caller all the same (_fb_actor: provenance, tenant and restore checks).
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

CREATE FUNCTION fb_ingest(task_type text, wrong_answer text, correction text, lesson text,
                          source text DEFAULT 'review_ui', tenant text DEFAULT NULL, context text DEFAULT NULL)
    RETURNS TABLE (id bigint, action text)
    LANGUAGE sql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT * FROM fb_ingest_batch(ARRAY[ROW(task_type, wrong_answer, correction, lesson, source)::fb_note_input],
                                      tenant, ARRAY[context]);
    END;

COMMENT ON FUNCTION fb_ingest_batch(fb_note_input[], text, text[]) IS
    'Stores many notes with one INSERT (embedded in batched model runs), all of one tenant (NULL: shared); '
    'contexts: the reviewed input behind each note, in the same order (optional). Returns, '
    'in input order, each note''s id and action: inserted; pending when it waits for a reviewer (flagged by '
    'fb_screen, or pg_feedback.review = all); merged when it was folded into a near-duplicate (the id is then the '
    'existing note''s); for the same correction already stored (or repeated in the batch), a counted report: updated '
    'when that note is active, else its status (deprecated, pending, rejected, purged), which a report never changes.';
COMMENT ON FUNCTION fb_ingest(text, text, text, text, text, text, text) IS
    'Stores one note: returns its id and action (see fb_ingest_batch); context: the reviewed input (code, diff) '
    'the correction was made on, optional, whose words help match code under review. Secrets are redacted first; submitting the '
    'same correction again counts a report on the stored note (latest wrong_answer and source, report_count + 1), '
    'never duplicates it; a rewording of an active note of the same task_type and tenant is merged into it, a '
    'revision of one supersedes it (see fb_compare_notes, pg_feedback.revisions).';
COMMENT ON FUNCTION _fb_on_conflict_do_nothing(oid) IS
    'Internal: whether the client''s statement is an INSERT into the relation with ON CONFLICT DO NOTHING (the '
    'insert trigger then counts no report and lets Postgres skip a stored note).';

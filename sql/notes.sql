-- pg_feedback: embedding functions, the notes table, its triggers and the ingest API.
-- Internal helpers start with "_fb_"; everything a user calls starts with "fb_".

------------------------------------------------------------------------------------------------------------------
-- Embedding
------------------------------------------------------------------------------------------------------------------

CREATE FUNCTION fb_embed(text) RETURNS vector(384)
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN _fb_embed($1, false)::vector(384);

CREATE FUNCTION fb_embed_query(text) RETURNS vector(384)
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN _fb_embed($1, true)::vector(384);

CREATE FUNCTION fb_embed_batch(texts text[], query boolean DEFAULT false) RETURNS vector[]
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT coalesce(array_agg(e::vector(384) ORDER BY n), '{}')
          FROM _fb_embed_batch(texts, query) WITH ORDINALITY AS t(e, n);
    END;

COMMENT ON FUNCTION fb_embed(text) IS
    'Embedding of a document (a note) with the model in pg_feedback.embedding_model: 384-wide, L2-normalised. '
    'Inputs longer than the model''s token limit are truncated. STABLE: the result depends on the configured model.';
COMMENT ON FUNCTION fb_embed_query(text) IS
    'Embedding of a search query: like fb_embed, with the model''s query prefix (bge-small-en-v1.5: '
    '"Represent this sentence for searching relevant passages: ").';
COMMENT ON FUNCTION fb_embed_batch(text[], boolean) IS
    'Embeddings of many texts in batched model runs (pg_feedback.embed_batch_size texts per run), in input order; '
    'NULL for a NULL element. query => true applies the query prefix.';
COMMENT ON FUNCTION _fb_embed(text, boolean) IS 'Internal: one embedding as real[]; use fb_embed or fb_embed_query.';
COMMENT ON FUNCTION _fb_embed_batch(text[], boolean) IS 'Internal: batched embeddings as rows of real[]; use fb_embed_batch.';
COMMENT ON FUNCTION fb_embedding_model() IS 'The configured embedding model (pg_feedback.embedding_model).';
COMMENT ON FUNCTION fb_count_tokens(text) IS
    'Tokens the embedding model''s tokenizer makes of a text (special tokens excluded, no truncation).';
COMMENT ON FUNCTION fb_model_stats() IS
    'This backend''s model activity since it started: model runs, texts embedded, pairs scored, loaded sessions.';
COMMENT ON FUNCTION fb_models() IS 'Models installed in pg_feedback.model_dir, as their manifests describe them.';
COMMENT ON FUNCTION fb_rerank(text, text[]) IS
    'Cross-encoder (pg_feedback.rerank_model) relevance of each passage to the query, in input order, from one '
    'batched run. Scores are raw logits: higher is more relevant, not probabilities. NULL passage, NULL score.';
COMMENT ON FUNCTION fb_note_id(text, text, text) IS
    'Content-hashed note id: sha256 hex of lower(trim(task_type)), lesson and correction (each trimmed, '
    'whitespace runs collapsed), joined by U+001F.';
COMMENT ON FUNCTION fb_document_text(text, text) IS 'The text a note is embedded from: "task_type: lesson".';

------------------------------------------------------------------------------------------------------------------
-- Who is acting
------------------------------------------------------------------------------------------------------------------

-- The role a statement runs for: the SET ROLE role if any, else the session user. Unlike current_user it is the
-- same inside SECURITY DEFINER functions, so provenance, audit rows and the restore check name the caller, not
-- the extension owner.
CREATE FUNCTION _fb_actor() RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN CASE WHEN current_setting('role') = 'none' THEN session_user::text ELSE current_setting('role') END;
COMMENT ON FUNCTION _fb_actor() IS
    'Internal: the role acting (SET ROLE role, else session user), also inside SECURITY DEFINER functions.';

-- The tenants (roles) the acting role belongs to (a superuser: every role). Evaluated once per query.
CREATE FUNCTION _fb_my_tenants() RETURNS text[]
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT coalesce(array_agg(r.rolname::text), '{}') FROM pg_catalog.pg_roles r
         WHERE pg_catalog.pg_has_role(_fb_actor(), r.oid, 'MEMBER');
    END;
COMMENT ON FUNCTION _fb_my_tenants() IS
    'Internal: names of the roles the acting role is a member of (its tenants).';

-- Whether the acting role may see or change a note of this tenant: shared notes (NULL) belong to everyone.
CREATE FUNCTION _fb_tenant_allowed(tenant text) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN tenant IS NULL
        OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                    WHERE r.rolname = tenant AND pg_catalog.pg_has_role(_fb_actor(), r.oid, 'MEMBER'));
COMMENT ON FUNCTION _fb_tenant_allowed(text) IS
    'Internal: true for a shared note (tenant NULL) or when the acting role is a member of the tenant role.';

-- A restore (pg_restore, psql of a dump) may keep every stored field: only a superuser or a reviewer, and only
-- with pg_feedback.restore_mode on. Anyone else's rows are new notes whatever the setting says.
CREATE FUNCTION _fb_restoring() RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    RETURN _fb_restore_mode()
       AND EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                    WHERE r.rolname = _fb_actor()
                      AND (r.rolsuper OR pg_catalog.pg_has_role(r.oid, 'feedback_reviewer', 'MEMBER')));
COMMENT ON FUNCTION _fb_restoring() IS
    'Internal: pg_feedback.restore_mode is on and the acting role is a superuser or a member of feedback_reviewer.';

------------------------------------------------------------------------------------------------------------------
-- Notes
------------------------------------------------------------------------------------------------------------------

CREATE TABLE feedback_notes (
    id               text PRIMARY KEY,
    task_type        text NOT NULL,
    wrong_answer     text NOT NULL DEFAULT '',
    correction       text NOT NULL,
    lesson           text NOT NULL,
    embedding        vector(384),
    embedding_model  text,
    source           text NOT NULL DEFAULT 'review_ui',
    created_by       text NOT NULL DEFAULT session_user,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    report_count     integer NOT NULL DEFAULT 1 CHECK (report_count >= 1),
    status           text NOT NULL DEFAULT 'active'
                     CHECK (status IN ('active', 'deprecated', 'pending', 'rejected', 'purged')),
    tenant           text,
    screening        jsonb NOT NULL DEFAULT '[]',
    redactions       text[] NOT NULL DEFAULT '{}'
);

CREATE INDEX feedback_notes_embedding_idx ON feedback_notes USING hnsw (embedding vector_cosine_ops);
CREATE INDEX feedback_notes_task_type_idx ON feedback_notes (task_type, status);
CREATE INDEX feedback_notes_pending_idx ON feedback_notes (created_at) WHERE status = 'pending';

SELECT pg_catalog.pg_extension_config_dump('feedback_notes', '');

COMMENT ON TABLE feedback_notes IS
    'One reviewer correction per row. id is the content hash (fb_note_id): submitting the same correction again '
    'updates the row. Secrets are redacted and instructions screened before a note is stored; flagged notes wait '
    'as pending for a reviewer. Notes are never deleted by the API: fb_deprecate sets status = ''deprecated''. '
    'Readers see active notes through feedback_active_notes.';
COMMENT ON COLUMN feedback_notes.id IS 'fb_note_id(task_type, lesson, correction), with the tenant when set; set by the server.';
COMMENT ON COLUMN feedback_notes.task_type IS 'Kind of task the lesson applies to (lower case), e.g. sql_injection_scan.';
COMMENT ON COLUMN feedback_notes.wrong_answer IS 'What the model answered (latest report), secrets redacted.';
COMMENT ON COLUMN feedback_notes.correction IS 'What the reviewer said the right answer is, secrets redacted.';
COMMENT ON COLUMN feedback_notes.lesson IS 'The one-line lesson fed back into prompts, secrets redacted.';
COMMENT ON COLUMN feedback_notes.embedding IS 'Embedding of "task_type: lesson", computed by the server in the inserting transaction.';
COMMENT ON COLUMN feedback_notes.embedding_model IS 'The model that computed embedding.';
COMMENT ON COLUMN feedback_notes.source IS 'Where the latest report came from (provenance), e.g. review_ui, import.';
COMMENT ON COLUMN feedback_notes.created_by IS 'Role that first reported the note (set by the server).';
COMMENT ON COLUMN feedback_notes.created_at IS 'When the note was first stored (set by the server).';
COMMENT ON COLUMN feedback_notes.report_count IS 'How many times the note was reported (counted by the server).';
COMMENT ON COLUMN feedback_notes.status IS
    'active (retrieved); pending (waits for fb_approve or fb_reject); deprecated (soft-deleted, fb_restore brings it '
    'back); rejected (a reviewer refused it); purged (its text was removed by fb_purge). Set by the server.';
COMMENT ON COLUMN feedback_notes.tenant IS
    'The role whose members may retrieve the note; NULL: shared with every reader. Near-duplicates never merge '
    'across tenants.';
COMMENT ON COLUMN feedback_notes.screening IS 'fb_screen findings on the lesson and correction (field, rule, family, severity, span).';
COMMENT ON COLUMN feedback_notes.redactions IS 'Kinds of secrets fb_redact replaced when the note was stored.';

-- What readers see of the notes: active notes of their tenants and shared ones. The view reads the table with its
-- owner's rights and filters by the caller (current_user), so a reader needs no right on feedback_notes itself;
-- security_barrier keeps a caller's functions from seeing rows the filter drops. (Row-level security on the table
-- would make Postgres refuse COPY FROM for every writer.)
CREATE VIEW feedback_active_notes WITH (security_barrier = true) AS
SELECT n.id, n.task_type, n.tenant, n.lesson, n.correction, n.embedding, n.embedding_model, n.source,
       n.created_at, n.updated_at, n.report_count
  FROM feedback_notes n
 WHERE n.status = 'active'
   AND (n.tenant IS NULL OR n.tenant = ANY ((SELECT _fb_my_tenants())::text[]));
COMMENT ON VIEW feedback_active_notes IS
    'Active notes visible to the current user: shared ones (tenant NULL) and those of tenant roles it is a member '
    'of. Retrieval reads this view, so it never returns another tenant''s note nor a pending one.';

-- Nearest active notes of one task_type among those the acting role may see (shared ones and its tenants'), with
-- what retrieval shows of them. Exact when the task_type holds at most pg_feedback.exact_scan_limit such notes
-- (perfect recall, cheap for small sets); otherwise the HNSW index with pgvector's iterative scan, so a selective
-- filter (task_type, tenant) still yields k candidates. scoped => true restricts to notes of exactly p_tenant
-- (NULL: shared notes), for near-duplicate merging. SECURITY DEFINER: readers have no right on feedback_notes, and
-- a view over it could not use the HNSW index for ordering (a security-barrier view is never flattened).
CREATE FUNCTION _fb_candidates(q vector(384), p_task_type text, k integer, mode text DEFAULT 'auto',
                               p_tenant text DEFAULT NULL, scoped boolean DEFAULT false)
    RETURNS TABLE (id text, distance double precision, lesson text, correction text, created_at timestamptz)
    LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    SET hnsw.iterative_scan = 'relaxed_order'
    SET hnsw.ef_search = 400
    AS $$
DECLARE
    exact_limit integer := current_setting('pg_feedback.exact_scan_limit')::integer;
    tenants text[] := CASE WHEN scoped THEN ARRAY[p_tenant] ELSE _fb_my_tenants() END;
    n bigint;
BEGIN
    IF k IS NULL OR k NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'k must be between 1 and 1000, not %', k
            USING ERRCODE = 'invalid_parameter_value', HINT = 'k is how many candidates to return, e.g. 20.';
    END IF;
    IF scoped AND NOT _fb_tenant_allowed(p_tenant) THEN
        RETURN;   -- another tenant's notes are never candidates for the acting role
    END IF;
    IF mode = 'auto' THEN
        SELECT count(*) INTO n
          FROM (SELECT 1 FROM feedback_notes f
                 WHERE f.task_type = p_task_type AND f.status = 'active'
                   AND CASE WHEN scoped THEN f.tenant IS NOT DISTINCT FROM p_tenant
                            ELSE f.tenant IS NULL OR f.tenant = ANY (tenants) END
                 LIMIT exact_limit + 1) s;
        mode := CASE WHEN n <= exact_limit THEN 'exact' ELSE 'ann' END;
    ELSIF mode NOT IN ('exact', 'ann') THEN
        RAISE EXCEPTION 'unknown candidate search mode "%"', mode
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Use auto, exact or ann.';
    END IF;
    IF mode = 'exact' THEN
        -- "+ 0" keeps the planner off the HNSW index: an exact top-k over the task_type's notes.
        RETURN QUERY
        SELECT f.id, f.embedding <=> q, f.lesson, f.correction, f.created_at
          FROM feedback_notes f
         WHERE f.task_type = p_task_type AND f.status = 'active' AND f.embedding IS NOT NULL
           AND CASE WHEN scoped THEN f.tenant IS NOT DISTINCT FROM p_tenant
                    ELSE f.tenant IS NULL OR f.tenant = ANY (tenants) END
         ORDER BY (f.embedding <=> q) + 0, f.id
         LIMIT k;
    ELSE
        -- "IS TRUE" keeps the planner on the HNSW index: with a plain equality it may pick the task_type btree
        -- and sort, which is the exact path. relaxed_order returns index order only approximately: re-sort.
        RETURN QUERY
        SELECT c.id, c.distance, c.lesson, c.correction, c.created_at
          FROM (SELECT f.id, f.embedding <=> q AS distance, f.lesson, f.correction, f.created_at
                  FROM feedback_notes f
                 WHERE (f.task_type = p_task_type) IS TRUE AND f.status = 'active'
                   AND CASE WHEN scoped THEN f.tenant IS NOT DISTINCT FROM p_tenant
                            ELSE f.tenant IS NULL OR f.tenant = ANY (tenants) END
                 ORDER BY f.embedding <=> q
                 LIMIT k) c
         ORDER BY c.distance, c.id;
    END IF;
END $$;
COMMENT ON FUNCTION _fb_candidates(vector, text, integer, text, text, boolean) IS
    'Internal: the k nearest active notes of a task_type to a vector among those the acting role may see (shared '
    'and its tenants''), with lesson, correction and created_at. mode auto: exact for small sets, HNSW iterative '
    'scan otherwise (see pg_feedback.exact_scan_limit); exact or ann force one path (fb_eval_ann compares them). '
    'scoped: only notes of exactly p_tenant.';

CREATE TABLE feedback_dedup_locks (
    tenant     text NOT NULL,
    task_type  text NOT NULL,
    PRIMARY KEY (tenant, task_type)
);
COMMENT ON TABLE feedback_dedup_locks IS
    'Internal: one row per (tenant, task_type) whose row lock serialises near-duplicate checks of concurrent '
    'ingests (tenant  for shared notes). Holds no note data; rebuilt on demand.';

CREATE TABLE feedback_note_merges (
    merged_id   text NOT NULL,
    into_id     text NOT NULL REFERENCES feedback_notes (id),
    similarity  real NOT NULL,
    task_type   text NOT NULL,
    lesson      text NOT NULL,
    correction  text NOT NULL,
    source      text NOT NULL,
    merged_by   text NOT NULL DEFAULT session_user,
    merged_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX feedback_note_merges_merged_id_idx ON feedback_note_merges (merged_id);
CREATE INDEX feedback_note_merges_into_id_idx ON feedback_note_merges (into_id);
SELECT pg_catalog.pg_extension_config_dump('feedback_note_merges', '');
COMMENT ON TABLE feedback_note_merges IS
    'Provenance of near-duplicate merges: a submitted note (merged_id = its content hash, its text and source) that '
    'was folded into an existing note (into_id) because their embeddings had cosine similarity >= '
    'pg_feedback.dup_threshold.';

------------------------------------------------------------------------------------------------------------------
-- Audit
------------------------------------------------------------------------------------------------------------------

CREATE TABLE feedback_audit (
    id          bigserial PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    actor       text NOT NULL,
    action      text NOT NULL,
    note_id     text,
    old_status  text,
    new_status  text,
    reason      text,
    detail      jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX feedback_audit_note_id_idx ON feedback_audit (note_id);
SELECT pg_catalog.pg_extension_config_dump('feedback_audit', '');
SELECT pg_catalog.pg_extension_config_dump('feedback_audit_id_seq', '');
COMMENT ON TABLE feedback_audit IS
    'Append-only trail of every review and status change, merge, purge and restore: who (actor), when, which note, '
    'old and new status, the reason. It never holds note text. Only feedback_reviewer reads it; UPDATE, DELETE and '
    'TRUNCATE are refused.';

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

-- A note with the server's cleaning applied (Rust, _fb_clean_note): blank or oversized fields refused, secrets
-- redacted, task_type and tenant normalised, id hashed from the redacted content (and tenant), lesson and
-- correction screened. Used by the insert and update triggers.
CREATE FUNCTION _fb_cleaned(n feedback_notes) RETURNS feedback_notes
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    c record;
BEGIN
    SELECT * INTO c FROM _fb_clean_note(n.task_type, n.wrong_answer, n.correction, n.lesson, n.tenant);
    n.id := c.id;
    n.task_type := c.task_type;
    n.wrong_answer := c.wrong_answer;
    n.correction := c.correction;
    n.lesson := c.lesson;
    n.screening := c.screening;
    n.redactions := c.redactions;
    n.tenant := c.tenant;
    RETURN n;
END $$;
COMMENT ON FUNCTION _fb_cleaned(feedback_notes) IS 'Internal: a note as the server stores it (see _fb_clean_note).';

-- The server's view of a submitted note (Rust, _fb_clean_note): blank fields refused, oversized ones refused,
-- secrets redacted, task_type normalised, id hashed from the redacted content (and tenant), lesson and correction
-- screened. Re-submitting the same note counts a report on the stored row. SECURITY DEFINER because writers have
-- no UPDATE right; it cleans the note itself, so calling it directly can do no more than submitting. Returns the
-- cleaned note when none is stored yet (the insert trigger stores it), NULL when the report was counted: the
-- note is cleaned once per row.
CREATE FUNCTION _fb_resubmit(n feedback_notes) RETURNS feedback_notes
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
BEGIN
    n := _fb_cleaned(n);
    IF NOT _fb_tenant_allowed(n.tenant) THEN
        RETURN n;   -- the insert goes on and is refused by its tenant check
    END IF;
    -- A purged note counts the report but takes no text: its text was removed on purpose.
    UPDATE feedback_notes f
       SET wrong_answer = CASE WHEN f.status = 'purged' THEN f.wrong_answer
                               ELSE coalesce(nullif(n.wrong_answer, ''), f.wrong_answer) END,
           source = CASE WHEN f.status = 'purged' THEN f.source
                         ELSE coalesce(nullif(fb_redact(btrim(n.source)), ''), f.source) END,
           updated_at = now(),
           report_count = f.report_count + 1
     WHERE f.id = n.id AND f.tenant IS NOT DISTINCT FROM n.tenant;
    RETURN CASE WHEN FOUND THEN NULL ELSE n END;
END $$;
COMMENT ON FUNCTION _fb_resubmit(feedback_notes) IS
    'Internal: counts a re-submission on the stored note with the same content (latest wrong_answer and source) '
    'and returns NULL; when no such note is stored, returns the note cleaned for storing.';

-- BEFORE INSERT, per row, as the inserting role: the server sets every field the client must not choose.
CREATE FUNCTION _fb_notes_before_insert() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    review text := _fb_review_mode();
    cleaned feedback_notes;
BEGIN
    IF _fb_restoring() THEN
        -- A restore brings back what was dumped; only a missing id or a vector without its model is recomputed.
        -- A reviewer (not a superuser) restores only notes of its own tenants.
        IF NEW.tenant IS NOT NULL AND NOT _fb_tenant_allowed(NEW.tenant) THEN
            RAISE EXCEPTION 'role "%" may not restore notes of tenant "%"', _fb_actor(), NEW.tenant
                USING ERRCODE = 'insufficient_privilege',
                      HINT = 'Restore as a superuser, or as a member of the tenant role.';
        END IF;
        IF NEW.id IS NULL THEN
            SELECT c2.id INTO NEW.id
              FROM _fb_clean_note(NEW.task_type, NEW.wrong_answer, NEW.correction, NEW.lesson, NEW.tenant) c2;
        END IF;
        IF NEW.embedding IS NULL OR NEW.embedding_model IS NULL THEN
            NEW.embedding := NULL;
            NEW.embedding_model := NULL;
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.tenant IS NOT NULL AND NOT _fb_tenant_allowed(NEW.tenant) THEN
        RAISE EXCEPTION 'role "%" may not write notes of tenant "%"', _fb_actor(), NEW.tenant
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'A note''s tenant must be a role you are a member of, or NULL for a shared note.';
    END IF;
    cleaned := _fb_resubmit(NEW);
    IF cleaned IS NULL THEN
        RETURN NULL;   -- counted on the stored note; no new row
    END IF;
    NEW := cleaned;
    NEW.source := coalesce(nullif(fb_redact(btrim(NEW.source)), ''), 'review_ui');
    -- Server-set fields: whatever the client sent is replaced.
    NEW.embedding := NULL;
    NEW.embedding_model := NULL;
    NEW.created_by := _fb_actor();
    NEW.created_at := now();
    NEW.updated_at := now();
    NEW.report_count := 1;
    NEW.status := CASE WHEN review = 'all' OR (review = 'flagged' AND jsonb_array_length(NEW.screening) > 0)
                       THEN 'pending' ELSE 'active' END;
    RETURN NEW;
END $$;

-- AFTER INSERT, per statement, with the extension owner's rights: embed every new row in batched model runs
-- (grouped into UPDATEs of at most 1024 rows), record held notes in the audit trail, merge near-duplicates.
CREATE FUNCTION _fb_notes_after_insert() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    model text := fb_embedding_model();
    chunk record;
    vectors vector[];
    actor text := _fb_actor();
BEGIN
    FOR chunk IN
        SELECT array_agg(id) AS ids, array_agg(fb_document_text(task_type, lesson)) AS docs
          FROM (SELECT id, task_type, lesson, (row_number() OVER ()) / 1024 AS part
                  FROM inserted_notes WHERE embedding IS NULL) s
         GROUP BY part
    LOOP
        -- Embed in its own step: inside the UPDATE, the planner's row estimate for unnest() would evaluate
        -- the STABLE call once at plan time and the executor again, running the model twice.
        vectors := fb_embed_batch(chunk.docs);
        UPDATE feedback_notes f
           SET embedding = e.embedding, embedding_model = model
          FROM unnest(chunk.ids, vectors) AS e(id, embedding)
         WHERE f.id = e.id;
    END LOOP;
    IF _fb_restoring() THEN
        INSERT INTO feedback_audit (actor, action, reason, detail)
        SELECT actor, 'restore', 'rows stored as sent (pg_feedback.restore_mode)', jsonb_build_object('rows', count(*))
          FROM inserted_notes HAVING count(*) > 0;
        RETURN NULL;
    END IF;
    INSERT INTO feedback_audit (actor, action, note_id, new_status, reason, detail)
    SELECT actor, 'hold', i.id, 'pending',
           CASE WHEN jsonb_array_length(i.screening) > 0 THEN 'flagged by fb_screen'
                ELSE 'pg_feedback.review = all' END,
           jsonb_build_object('rules', (SELECT coalesce(jsonb_agg(DISTINCT f ->> 'rule'), '[]')
                                          FROM jsonb_array_elements(i.screening) f))
      FROM inserted_notes i
     WHERE i.status = 'pending';
    PERFORM _fb_merge_near_duplicates(array_agg(id ORDER BY id)) FROM inserted_notes WHERE status = 'active';
    RETURN NULL;
END $$;

-- Folds each given (new, active) note into the most similar other active note of its task_type and tenant when
-- their cosine similarity reaches pg_feedback.dup_threshold: the existing note's report_count grows, its source
-- and updated_at take the new report's, the merge is recorded in feedback_note_merges and feedback_audit, the new
-- row goes away. A row lock per (tenant, task_type) in feedback_dedup_locks, taken in sorted order until the end
-- of the transaction, makes concurrent ingests of near-duplicates wait for each other, so under READ COMMITTED the
-- second one sees the first and merges.
CREATE FUNCTION _fb_merge_near_duplicates(ids text[]) RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
DECLARE
    threshold double precision := current_setting('pg_feedback.dup_threshold')::double precision;
    r record;
    near record;
    merged integer := 0;
BEGIN
    IF threshold >= 1 OR ids IS NULL THEN
        RETURN 0;
    END IF;
    -- Row locks in a table of the extension's own (an advisory lock key would be open to anyone to take).
    INSERT INTO feedback_dedup_locks (tenant, task_type)
    SELECT DISTINCT coalesce(f.tenant, ''), f.task_type FROM feedback_notes f WHERE f.id = ANY (ids)
    ON CONFLICT DO NOTHING;
    PERFORM 1 FROM feedback_dedup_locks l
      JOIN (SELECT DISTINCT coalesce(f.tenant, '') AS tenant, f.task_type FROM feedback_notes f
             WHERE f.id = ANY (ids)) k USING (tenant, task_type)
     ORDER BY l.tenant, l.task_type
       FOR UPDATE OF l;
    FOR r IN
        SELECT f.* FROM unnest(ids) WITH ORDINALITY AS i(id, n) JOIN feedback_notes f USING (id)
         WHERE f.embedding IS NOT NULL AND f.status = 'active' ORDER BY i.n
    LOOP
        -- The row may have absorbed or been absorbed by an earlier one of this batch.
        CONTINUE WHEN NOT EXISTS (SELECT 1 FROM feedback_notes f WHERE f.id = r.id);
        SELECT c.id, 1 - c.distance AS similarity INTO near
          FROM _fb_candidates(r.embedding, r.task_type, 2, 'auto', r.tenant, true) c
         WHERE c.id <> r.id
         ORDER BY c.distance
         LIMIT 1;
        CONTINUE WHEN near.id IS NULL OR near.similarity < threshold;
        UPDATE feedback_notes
           SET report_count = report_count + r.report_count, source = r.source, updated_at = now()
         WHERE id = near.id AND status = 'active';
        CONTINUE WHEN NOT FOUND;   -- deprecated meanwhile by a reviewer: the new note stays
        INSERT INTO feedback_note_merges (merged_id, into_id, similarity, task_type, lesson, correction, source,
                                          merged_by)
        VALUES (r.id, near.id, near.similarity, r.task_type, r.lesson, r.correction, r.source, _fb_actor());
        INSERT INTO feedback_audit (actor, action, note_id, detail)
        VALUES (_fb_actor(), 'merge', near.id,
                jsonb_build_object('merged_id', r.id, 'similarity', round(near.similarity::numeric, 4)));
        -- Notes merged into this one earlier in the batch now belong to its target.
        UPDATE feedback_note_merges SET into_id = near.id WHERE into_id = r.id;
        DELETE FROM feedback_notes WHERE id = r.id;
        merged := merged + 1;
    END LOOP;
    RETURN merged;
END $$;
COMMENT ON FUNCTION _fb_merge_near_duplicates(text[]) IS
    'Internal: merges new notes into near-duplicate active notes of the same task_type and tenant '
    '(pg_feedback.dup_threshold). Runs inside the insert trigger with the owner''s rights.';

-- BEFORE UPDATE of the content, per row (only the owner and superusers may UPDATE): the same cleaning as an
-- insert (redaction, screening, id), and a new embedding when the embedded text changed.
CREATE FUNCTION _fb_notes_before_update() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
BEGIN
    IF NEW.status = 'purged' THEN
        RETURN NEW;   -- fb_purge blanks the text: the note keeps its id and is never embedded again
    END IF;
    NEW := _fb_cleaned(NEW);
    NEW.redactions := ARRAY(SELECT DISTINCT unnest(OLD.redactions || NEW.redactions) ORDER BY 1);
    IF NEW.id <> OLD.id AND EXISTS (SELECT 1 FROM feedback_notes WHERE id = NEW.id) THEN
        RAISE EXCEPTION 'another note already has this content (id %)', NEW.id
            USING ERRCODE = 'unique_violation',
                  HINT = 'Deprecate this note with fb_deprecate instead of editing it into a duplicate.';
    END IF;
    IF NEW.task_type IS DISTINCT FROM OLD.task_type OR NEW.lesson IS DISTINCT FROM OLD.lesson
       OR NEW.embedding IS NULL THEN
        NEW.embedding := fb_embed(fb_document_text(NEW.task_type, NEW.lesson));
        NEW.embedding_model := fb_embedding_model();
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
    BEFORE UPDATE OF task_type, wrong_answer, lesson, correction, tenant ON feedback_notes
    FOR EACH ROW EXECUTE FUNCTION _fb_notes_before_update();

COMMENT ON FUNCTION _fb_notes_before_insert() IS
    'Trigger: cleans a new note (redaction, screening, id), sets every server-owned field, and turns a '
    're-submission into a counted report. With pg_feedback.restore_mode (superuser or reviewer) keeps the row as sent.';
COMMENT ON FUNCTION _fb_notes_after_insert() IS
    'Trigger: embeds the rows of an INSERT or COPY in batched model runs in the same transaction, audits held notes '
    'and merges near-duplicates.';
COMMENT ON FUNCTION _fb_notes_before_update() IS
    'Trigger: re-cleans an edited note (redaction, screening, id) and re-embeds it when its embedded text changed.';

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

-- What became of submitted notes, by their stored id: the status of the stored note, or the note it was merged
-- into. SECURITY DEFINER: writers cannot read feedback_notes; it reveals only the status of ids they name.
CREATE FUNCTION _fb_ingest_outcomes(ids text[])
    RETURNS TABLE (id text, status text, into_id text)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT i.id, f.status,
               (SELECT m.into_id FROM feedback_note_merges m
                 WHERE f.id IS NULL AND m.merged_id = i.id ORDER BY m.merged_at DESC LIMIT 1)
          FROM (SELECT DISTINCT unnest(ids) AS id) i
          LEFT JOIN feedback_notes f ON f.id = i.id AND _fb_tenant_allowed(f.tenant);
    END;
COMMENT ON FUNCTION _fb_ingest_outcomes(text[]) IS
    'Internal: for stored note ids, the note''s status, or the note it was merged into.';

-- SECURITY DEFINER so that it can learn which rows its INSERT created (RETURNING) while writers have no SELECT
-- on feedback_notes; the triggers act for the caller all the same (_fb_actor: provenance, tenant and restore checks).
CREATE FUNCTION fb_ingest_batch(notes fb_note_input[], tenant text DEFAULT NULL)
    RETURNS TABLE (id text, action text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    AS $$
#variable_conflict use_column
DECLARE
    inserted text[];
BEGIN
    -- RETURNING lists the rows this INSERT really added: a re-submission of a stored note is turned into a
    -- counted report by the insert trigger and is not returned. Two sessions inserting the same new note at once
    -- meet at the primary key: the loser's whole INSERT is rolled back to its savepoint and run again, and then
    -- finds the winner's row and counts a report on it.
    FOR attempt IN 1..3 LOOP
        BEGIN
            WITH ins AS (
                INSERT INTO feedback_notes AS f (task_type, wrong_answer, correction, lesson, source, tenant)
                SELECT n.task_type, coalesce(n.wrong_answer, ''), n.correction, n.lesson, n.source, fb_ingest_batch.tenant
                  FROM unnest(notes) WITH ORDINALITY AS n(task_type, wrong_answer, correction, lesson, source, ord)
                 ORDER BY ord
                RETURNING f.id)
            SELECT coalesce(array_agg(ins.id), '{}') INTO inserted FROM ins;
            EXIT;
        EXCEPTION WHEN unique_violation THEN
            IF attempt = 3 THEN
                RAISE;
            END IF;
        END;
    END LOOP;

    RETURN QUERY
    WITH input AS (
        SELECT n.ord, c.id AS nid
          FROM unnest(notes) WITH ORDINALITY AS n(task_type, wrong_answer, correction, lesson, source, ord)
         CROSS JOIN LATERAL _fb_clean_note(n.task_type, n.wrong_answer, n.correction, n.lesson, fb_ingest_batch.tenant) c
    ), outcome AS (
        SELECT * FROM _fb_ingest_outcomes((SELECT array_agg(nid) FROM input))
    )
    SELECT coalesce(o.into_id, i.nid),
           CASE WHEN c.id IS NULL OR row_number() OVER (PARTITION BY i.nid ORDER BY i.ord) > 1 THEN 'updated'
                WHEN o.into_id IS NOT NULL THEN 'merged'
                WHEN o.status = 'pending' THEN 'pending'
                ELSE 'inserted' END
      FROM input i
      LEFT JOIN (SELECT DISTINCT unnest(inserted) AS id) c ON c.id = i.nid
      LEFT JOIN outcome o ON o.id = i.nid
     ORDER BY i.ord;
END $$;

CREATE FUNCTION fb_ingest(task_type text, wrong_answer text, correction text, lesson text,
                          source text DEFAULT 'review_ui', tenant text DEFAULT NULL)
    RETURNS TABLE (id text, action text)
    LANGUAGE sql
    SET search_path = pg_catalog, @extschema@, @extschema:vector@, pg_temp
    BEGIN ATOMIC
        SELECT * FROM fb_ingest_batch(ARRAY[ROW(task_type, wrong_answer, correction, lesson, source)::fb_note_input],
                                      tenant);
    END;

COMMENT ON FUNCTION fb_ingest_batch(fb_note_input[], text) IS
    'Stores many notes with one INSERT (embedded in batched model runs), all of one tenant (NULL: shared). Returns, in input order, each note''s id and '
    'action: inserted; pending when it waits for a reviewer (flagged by fb_screen, or pg_feedback.review = all); '
    'updated when the same correction was already stored (or repeated in the batch); merged when it was folded into '
    'a near-duplicate (the id returned is then the existing note''s).';
COMMENT ON FUNCTION fb_ingest(text, text, text, text, text, text) IS
    'Stores one note: returns its id and action (inserted | pending | updated | merged). Secrets are redacted first; '
    'submitting the same correction again updates the stored note (latest wrong_answer and source, report_count + 1), '
    'never duplicates it; a note whose embedding is within pg_feedback.dup_threshold of an active note of the same '
    'task_type and tenant is merged into it.';

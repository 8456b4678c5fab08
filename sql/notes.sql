-- pg_feedback: embedding functions, the notes table, its triggers and the ingest API.
-- Internal helpers start with "_fb_"; everything a user calls starts with "fb_".

------------------------------------------------------------------------------------------------------------------
-- Embedding
------------------------------------------------------------------------------------------------------------------

CREATE FUNCTION fb_embed(text) RETURNS vector(384)
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    RETURN _fb_embed($1, false)::vector(384);

CREATE FUNCTION fb_embed_query(text) RETURNS vector(384)
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    RETURN _fb_embed($1, true)::vector(384);

CREATE FUNCTION fb_embed_batch(texts text[], query boolean DEFAULT false) RETURNS vector[]
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
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
    status           text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'deprecated'))
);

CREATE INDEX feedback_notes_embedding_idx ON feedback_notes USING hnsw (embedding vector_cosine_ops);
CREATE INDEX feedback_notes_task_type_idx ON feedback_notes (task_type, status);

SELECT pg_catalog.pg_extension_config_dump('feedback_notes', '');

COMMENT ON TABLE feedback_notes IS
    'One reviewer correction per row. id is the content hash (fb_note_id): submitting the same correction again '
    'updates the row. Notes are never deleted by the API: fb_deprecate sets status = ''deprecated''.';
COMMENT ON COLUMN feedback_notes.id IS 'fb_note_id(task_type, lesson, correction); set by the insert trigger.';
COMMENT ON COLUMN feedback_notes.task_type IS 'Kind of task the lesson applies to (lower case), e.g. sql_injection_scan.';
COMMENT ON COLUMN feedback_notes.wrong_answer IS 'What the model answered (latest report).';
COMMENT ON COLUMN feedback_notes.correction IS 'What the reviewer said the right answer is.';
COMMENT ON COLUMN feedback_notes.lesson IS 'The one-line lesson fed back into prompts.';
COMMENT ON COLUMN feedback_notes.embedding IS 'Embedding of "task_type: lesson", computed in the inserting transaction.';
COMMENT ON COLUMN feedback_notes.embedding_model IS 'The model that computed embedding.';
COMMENT ON COLUMN feedback_notes.source IS 'Where the latest report came from (provenance), e.g. review_ui, import.';
COMMENT ON COLUMN feedback_notes.created_by IS 'Database role that first reported the note.';
COMMENT ON COLUMN feedback_notes.report_count IS 'How many times the note was reported.';
COMMENT ON COLUMN feedback_notes.status IS 'active, or deprecated (soft-deleted: kept, never retrieved).';

-- Nearest active notes of one task_type. Exact when the task_type holds at most pg_feedback.exact_scan_limit
-- active notes (perfect recall, cheap for small sets); otherwise the HNSW index with pgvector's iterative scan,
-- so a selective task_type filter still yields k candidates instead of the few an ef_search-sized scan keeps.
CREATE FUNCTION _fb_candidates(q vector(384), p_task_type text, k integer, mode text DEFAULT 'auto')
    RETURNS TABLE (id text, distance double precision)
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    SET search_path FROM CURRENT
    SET hnsw.iterative_scan = 'relaxed_order'
    SET hnsw.ef_search = 400
    AS $$
DECLARE
    exact_limit integer := current_setting('pg_feedback.exact_scan_limit')::integer;
    n bigint;
BEGIN
    IF mode = 'auto' THEN
        SELECT count(*) INTO n
          FROM (SELECT 1 FROM feedback_notes f
                 WHERE f.task_type = p_task_type AND f.status = 'active' LIMIT exact_limit + 1) s;
        mode := CASE WHEN n <= exact_limit THEN 'exact' ELSE 'ann' END;
    ELSIF mode NOT IN ('exact', 'ann') THEN
        RAISE EXCEPTION 'unknown candidate search mode "%"', mode
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Use auto, exact or ann.';
    END IF;
    IF mode = 'exact' THEN
        -- "+ 0" keeps the planner off the HNSW index: an exact top-k over the task_type's notes.
        RETURN QUERY
        SELECT f.id, f.embedding <=> q
          FROM feedback_notes f
         WHERE f.task_type = p_task_type AND f.status = 'active' AND f.embedding IS NOT NULL
         ORDER BY (f.embedding <=> q) + 0, f.id
         LIMIT k;
    ELSE
        -- "IS TRUE" keeps the planner on the HNSW index: with a plain equality it may pick the task_type btree
        -- and sort, which is the exact path. relaxed_order returns index order only approximately: re-sort.
        RETURN QUERY
        SELECT c.id, c.distance
          FROM (SELECT f.id, f.embedding <=> q AS distance
                  FROM feedback_notes f
                 WHERE (f.task_type = p_task_type) IS TRUE AND f.status = 'active'
                 ORDER BY f.embedding <=> q
                 LIMIT k) c
         ORDER BY c.distance, c.id;
    END IF;
END $$;
COMMENT ON FUNCTION _fb_candidates(vector, text, integer, text) IS
    'Internal: the k nearest active notes of a task_type to a vector. mode auto: exact for small sets, HNSW iterative '
    'scan otherwise (see pg_feedback.exact_scan_limit); exact or ann force one path (fb_eval_ann compares them).';

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

-- Validates a note (required fields present) and sets its normalised task_type and content-hash id.
CREATE FUNCTION _fb_prepare_note(n feedback_notes) RETURNS feedback_notes
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path FROM CURRENT
    AS $$
DECLARE
    field text;
BEGIN
    field := CASE WHEN n.task_type IS NULL OR btrim(n.task_type) = '' THEN 'task_type'
                  WHEN n.lesson IS NULL OR btrim(n.lesson) = '' THEN 'lesson'
                  WHEN n.correction IS NULL OR btrim(n.correction) = '' THEN 'correction' END;
    IF field IS NOT NULL THEN
        RAISE EXCEPTION 'a feedback note needs a non-empty %', field
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'task_type, lesson and correction are required; wrong_answer may be empty.';
    END IF;
    n.task_type := lower(btrim(n.task_type));
    n.id := fb_note_id(n.task_type, n.lesson, n.correction);
    RETURN n;
END $$;
COMMENT ON FUNCTION _fb_prepare_note(feedback_notes) IS
    'Internal: rejects a note with a blank task_type, lesson or correction; normalises task_type and sets the id.';

-- BEFORE INSERT, per row: normalise, compute the id; a note that already exists is updated instead (the new row
-- is dropped), so re-submitting never duplicates. The embedding is left for the statement trigger below.
-- Two transactions inserting the same new note at the same moment meet at the primary key: fb_ingest and
-- fb_ingest_batch turn that into an update (ON CONFLICT); a plain INSERT gets unique_violation.
CREATE FUNCTION _fb_notes_before_insert() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
BEGIN
    NEW := _fb_prepare_note(NEW);
    UPDATE feedback_notes
       SET wrong_answer = coalesce(nullif(NEW.wrong_answer, ''), wrong_answer),
           source = NEW.source,
           updated_at = now(),
           report_count = report_count + 1
     WHERE id = NEW.id;
    IF FOUND THEN
        RETURN NULL;
    END IF;
    -- An embedding is trusted only with the model that made it (a restore); otherwise it is computed.
    IF NEW.embedding IS NULL OR NEW.embedding_model IS NULL THEN
        NEW.embedding := NULL;
        NEW.embedding_model := NULL;
    END IF;
    RETURN NEW;
END $$;

-- AFTER INSERT, per statement: embed every new row in batched model runs (one run per
-- pg_feedback.embed_batch_size rows, grouped into UPDATEs of at most 1024 rows), in the same transaction.
CREATE FUNCTION _fb_notes_embed_inserted() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    model text := fb_embedding_model();
    chunk record;
    vectors vector[];
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
    PERFORM _fb_merge_near_duplicates(array_agg(id ORDER BY id)) FROM inserted_notes;
    RETURN NULL;
END $$;

-- Folds each given (new) note into the most similar other active note of its task_type when their cosine
-- similarity reaches pg_feedback.dup_threshold: the existing note's report_count grows, its source and
-- updated_at take the new report's, the merge is recorded in feedback_note_merges, the new row goes away.
-- A transaction-level lock per task_type (taken in sorted order) makes concurrent ingests of near-duplicates
-- wait for each other, so under READ COMMITTED the second one sees the first and merges instead of inserting.
CREATE FUNCTION _fb_merge_near_duplicates(ids text[]) RETURNS integer
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    threshold double precision := current_setting('pg_feedback.dup_threshold')::double precision;
    t text;
    r record;
    near record;
    merged integer := 0;
BEGIN
    IF threshold >= 1 OR ids IS NULL THEN
        RETURN 0;
    END IF;
    FOR t IN SELECT DISTINCT f.task_type FROM feedback_notes f WHERE f.id = ANY (ids) ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(hashtext('pg_feedback:dedup'), hashtext(t));
    END LOOP;
    FOR r IN
        SELECT f.* FROM unnest(ids) WITH ORDINALITY AS i(id, n) JOIN feedback_notes f USING (id)
         WHERE f.embedding IS NOT NULL ORDER BY i.n
    LOOP
        -- The row may have absorbed or been absorbed by an earlier one of this batch.
        CONTINUE WHEN NOT EXISTS (SELECT 1 FROM feedback_notes f WHERE f.id = r.id);
        SELECT c.id, 1 - c.distance AS similarity INTO near
          FROM _fb_candidates(r.embedding, r.task_type, 2) c
         WHERE c.id <> r.id
         ORDER BY c.distance
         LIMIT 1;
        CONTINUE WHEN near.id IS NULL OR near.similarity < threshold;
        UPDATE feedback_notes
           SET report_count = report_count + r.report_count, source = r.source, updated_at = now()
         WHERE id = near.id;
        INSERT INTO feedback_note_merges (merged_id, into_id, similarity, task_type, lesson, correction, source)
        VALUES (r.id, near.id, near.similarity, r.task_type, r.lesson, r.correction, r.source);
        -- Notes merged into this one earlier in the batch now belong to its target.
        UPDATE feedback_note_merges SET into_id = near.id WHERE into_id = r.id;
        DELETE FROM feedback_notes WHERE id = r.id;
        merged := merged + 1;
    END LOOP;
    RETURN merged;
END $$;
COMMENT ON FUNCTION _fb_merge_near_duplicates(text[]) IS
    'Internal: merges new notes into near-duplicate active notes of the same task_type (pg_feedback.dup_threshold).';

-- BEFORE UPDATE of the embedded content, per row: new id, new embedding (single-row model run).
CREATE FUNCTION _fb_notes_before_update() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
BEGIN
    NEW := _fb_prepare_note(NEW);
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
CREATE TRIGGER feedback_notes_embed_inserted AFTER INSERT ON feedback_notes
    REFERENCING NEW TABLE AS inserted_notes
    FOR EACH STATEMENT EXECUTE FUNCTION _fb_notes_embed_inserted();
CREATE TRIGGER feedback_notes_before_update BEFORE UPDATE OF task_type, lesson, correction ON feedback_notes
    FOR EACH ROW EXECUTE FUNCTION _fb_notes_before_update();

COMMENT ON FUNCTION _fb_notes_before_insert() IS
    'Trigger: validates and normalises a new note, sets its content-hash id, and turns a re-submission into an update.';
COMMENT ON FUNCTION _fb_notes_embed_inserted() IS
    'Trigger: embeds the rows of an INSERT or COPY in batched model runs, in the same transaction.';
COMMENT ON FUNCTION _fb_notes_before_update() IS
    'Trigger: recomputes id and embedding when task_type, lesson or correction change.';

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

CREATE FUNCTION fb_ingest_batch(notes fb_note_input[])
    RETURNS TABLE (id text, action text)
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
#variable_conflict use_column
DECLARE
    inserted text[];
BEGIN
    -- RETURNING lists the rows this INSERT really added: a re-submission of a stored note is turned into an
    -- update by the insert trigger and is not returned.
    -- ON CONFLICT covers a concurrent session inserting the same new note: this one waits at the primary key,
    -- then updates. xmax = 0 marks a row this statement created.
    WITH ins AS (
        INSERT INTO feedback_notes AS f (task_type, wrong_answer, correction, lesson, source)
        SELECT n.task_type, coalesce(n.wrong_answer, ''), n.correction, n.lesson, coalesce(n.source, 'review_ui')
          FROM unnest(notes) WITH ORDINALITY AS n(task_type, wrong_answer, correction, lesson, source, ord)
         ORDER BY ord
        ON CONFLICT (id) DO UPDATE
           SET wrong_answer = coalesce(nullif(excluded.wrong_answer, ''), f.wrong_answer),
               source = excluded.source, updated_at = now(), report_count = f.report_count + 1
        RETURNING f.id, f.xmax = 0 AS created)
    SELECT coalesce(array_agg(ins.id) FILTER (WHERE ins.created), '{}') INTO inserted FROM ins;

    -- The ids this INSERT created are joined (c), not searched with <> ALL per input: quadratic in the batch.
    RETURN QUERY
    SELECT coalesce(m.into_id, i.nid),
           CASE WHEN c.id IS NULL OR row_number() OVER (PARTITION BY i.nid ORDER BY i.ord) > 1 THEN 'updated'
                WHEN m.into_id IS NOT NULL THEN 'merged'
                ELSE 'inserted' END
      FROM unnest(notes) WITH ORDINALITY AS n(task_type, wrong_answer, correction, lesson, source, ord)
     CROSS JOIN LATERAL (SELECT fb_note_id(n.task_type, n.lesson, n.correction) AS nid, n.ord) i
      LEFT JOIN (SELECT DISTINCT unnest(inserted) AS id) c ON c.id = i.nid
      LEFT JOIN LATERAL (
            SELECT mm.into_id FROM feedback_note_merges mm
             WHERE mm.merged_id = i.nid AND NOT EXISTS (SELECT 1 FROM feedback_notes f WHERE f.id = i.nid)
             ORDER BY mm.merged_at DESC LIMIT 1) m ON true
     ORDER BY i.ord;
END $$;

CREATE FUNCTION fb_ingest(task_type text, wrong_answer text, correction text, lesson text,
                          source text DEFAULT 'review_ui')
    RETURNS TABLE (id text, action text)
    LANGUAGE sql SET search_path FROM CURRENT
    BEGIN ATOMIC
        SELECT * FROM fb_ingest_batch(ARRAY[ROW(task_type, wrong_answer, correction, lesson, source)::fb_note_input]);
    END;

CREATE FUNCTION fb_deprecate(note_id text) RETURNS boolean
    LANGUAGE sql SET search_path FROM CURRENT
    BEGIN ATOMIC
        WITH d AS (
            UPDATE feedback_notes SET status = 'deprecated', updated_at = now()
             WHERE id = note_id AND status = 'active'
            RETURNING 1)
        SELECT count(*) > 0 FROM d;
    END;

COMMENT ON FUNCTION fb_ingest_batch(fb_note_input[]) IS
    'Stores many notes with one INSERT (embedded in batched model runs). Returns, in input order, each note''s id and '
    'action: inserted; updated when the same correction was already stored (or repeated in the batch); merged when '
    'it was folded into a near-duplicate (the id returned is then the existing note''s).';
COMMENT ON FUNCTION fb_ingest(text, text, text, text, text) IS
    'Stores one note: returns its id and action (inserted | updated | merged). Submitting the same correction again '
    'updates the stored note (latest wrong_answer and source, report_count + 1), never duplicates it; a note whose '
    'embedding is within pg_feedback.dup_threshold of an active note of the same task_type is merged into it.';
COMMENT ON FUNCTION fb_deprecate(text) IS
    'Soft-deletes a note (status = deprecated); true if an active note was deprecated. Notes are never deleted.';

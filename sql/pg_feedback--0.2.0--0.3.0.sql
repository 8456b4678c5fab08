-- pg_feedback 0.2.0 -> 0.3.0: the shared inference worker's view. Nothing stored changes.
\echo Use "ALTER EXTENSION pg_feedback UPDATE TO '0.3.0'" to load this file. \quit

CREATE FUNCTION "_fb_worker_status"() RETURNS TABLE (
	"mode" TEXT,
	"pid" INT,
	"started_at" timestamp with time zone,
	"restarts" bigint,
	"runners" INT,
	"threads" INT,
	"merge_requests" bool,
	"loaded_models" TEXT[],
	"queue_depth" INT,
	"in_flight" INT,
	"batches" bigint,
	"requests" bigint,
	"texts" bigint,
	"pairs" bigint,
	"model_runs" bigint,
	"texts_per_run" double precision,
	"pairs_per_run" double precision,
	"requests_per_batch" double precision,
	"wait_ms" double precision,
	"run_ms" double precision,
	"errors" bigint
)
STRICT VOLATILE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', '_fb_worker_status_wrapper';


CREATE VIEW feedback_worker AS
SELECT * FROM _fb_worker_status();

COMMENT ON VIEW feedback_worker IS
    'The shared inference worker (pg_feedback in shared_preload_libraries): mode this session uses (worker or backend), '
    'pid, start time, restarts, runners (model runs at once) and intra-op threads per runner, whether requests of '
    'different sessions share model runs, loaded models '
    '(kind: name@sha256 of the weights), requests queued and taken (running or waiting for a runner) now, and since '
    'server start: batches (worker '
    'wake-ups that answered requests), requests, texts embedded, pairs scored, model runs, texts and pairs per model run, '
    'requests per batch, total time requests waited in the queue and time spent running models (ms), and errors. '
    'Without the preloaded library only mode is set.';
COMMENT ON FUNCTION _fb_worker_status() IS 'Internal: the row of feedback_worker, read from shared memory.';

REVOKE ALL ON FUNCTION _fb_worker_status() FROM PUBLIC;
REVOKE ALL ON feedback_worker FROM PUBLIC;
GRANT SELECT ON feedback_worker TO feedback_reader;
GRANT EXECUTE ON FUNCTION _fb_worker_status() TO feedback_reader;

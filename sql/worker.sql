-- The shared inference worker, as BI tools and psql scripts read it.

-- The worker serves every database of the cluster: what it is doing and has done (queue, counters, loaded models)
-- is other databases' activity too, shown only to roles that may read every session's statistics
-- (pg_read_all_stats, as pg_stat_activity does); its mode and configuration to every role granted the view.
CREATE VIEW feedback_worker AS
SELECT w.mode, w.pid, w.started_at, w.restarts, w.runners, w.threads, w.merge_requests,
       CASE WHEN s.may THEN w.loaded_models END AS loaded_models,
       CASE WHEN s.may THEN w.queue_depth END AS queue_depth,
       CASE WHEN s.may THEN w.in_flight END AS in_flight,
       CASE WHEN s.may THEN w.batches END AS batches,
       CASE WHEN s.may THEN w.requests END AS requests,
       CASE WHEN s.may THEN w.texts END AS texts,
       CASE WHEN s.may THEN w.pairs END AS pairs,
       CASE WHEN s.may THEN w.model_runs END AS model_runs,
       CASE WHEN s.may THEN w.texts_per_run END AS texts_per_run,
       CASE WHEN s.may THEN w.pairs_per_run END AS pairs_per_run,
       CASE WHEN s.may THEN w.requests_per_batch END AS requests_per_batch,
       CASE WHEN s.may THEN w.wait_ms END AS wait_ms,
       CASE WHEN s.may THEN w.run_ms END AS run_ms,
       CASE WHEN s.may THEN w.errors END AS errors
  FROM _fb_worker_status() w
 CROSS JOIN (SELECT pg_has_role(current_user, 'pg_read_all_stats', 'USAGE') AS may) s;

COMMENT ON VIEW feedback_worker IS
    'The shared inference worker (pg_feedback in shared_preload_libraries): mode this session uses (worker or backend), '
    'pid, start time, restarts, runners (model runs at once) and intra-op threads per runner, whether requests of '
    'different sessions share model runs, loaded models '
    '(kind: name@sha256 of the weights), requests queued and taken (running or waiting for a runner) now, and since '
    'server start: batches (worker '
    'wake-ups that answered requests), requests, texts embedded, pairs scored, model runs, texts and pairs per model run, '
    'requests per batch, total time requests waited in the queue and time spent running models (ms), and errors. '
    'Without the preloaded library only mode is set. The queue, the counters and the loaded models are the whole '
    'cluster''s: NULL unless the caller may read all statistics (pg_read_all_stats, pg_monitor, a superuser).';
COMMENT ON FUNCTION _fb_worker_status() IS 'Internal: the row of feedback_worker, read from shared memory.';

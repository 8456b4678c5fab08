-- The shared inference worker, as BI tools and psql scripts read it.

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
    'Without the preloaded library only mode is set. The queue, the counters and the loaded models are the whole '
    'cluster''s: NULL unless the caller may read all statistics (pg_read_all_stats, pg_monitor, a superuser).';
COMMENT ON FUNCTION _fb_worker_status() IS 'Internal: the row of feedback_worker, read from shared memory.';

"""End-to-end: the shared inference worker (pg_feedback in shared_preload_libraries), through real sessions.

Run by make test against the end-to-end server started with the library preloaded:
    python tests/e2e/worker.py PORT PG_BINDIR [test_name ...]

- ONNX Runtime is loaded only in the worker, whose model threads block every signal; backends load no model.
- 32 concurrent sessions (16 writers through feedback_writer, 16 readers) get the vectors and scores a single
  backend-mode session gets for the same statements (cosine >= 0.999).
- With batch_merge on, requests of different sessions share model runs (and how far their vectors move).
- A model error in the worker fails only the requests it concerns, with a SQLSTATE and a HINT; the next call works.
- SIGTERM to the worker in the middle of a bulk load: the loader gets an ERROR (nothing of it is stored), no
  session hangs, and the postmaster starts a new worker.
- A cancelled wait (pg_cancel_backend, statement_timeout) returns within 100 ms and leaves no slot behind.
"""

import math
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

from harness import connect as _connect, fresh_database, one, run_tests

PORT = int(sys.argv[1])
ONLY = sys.argv[3:]
DB, REF = "fb_worker_e2e", "fb_worker_ref"
WRITER = "fb_worker_w"
BGE, CE = "bge-small-en-v1.5", "ms-marco-MiniLM-L-12-v2"
TASK = "perf_review"


def connect(db=DB, user="postgres"):
    return _connect(PORT, db, user)


def vec(text):
    return [float(x) for x in text.strip("[]").split(",")]


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def note(w, i):
    topic = ["N+1 queries in a loop", "a missing index on a foreign key", "SELECT * over a wide table",
             "OFFSET pagination on a large table", "an unbounded IN list", "a sequential scan on every request"][i % 6]
    return (TASK, f"Reviewer {w} case {i}: the answer missed {topic} in service {w * 100 + i}.",
            f"Writer {w}, case {i}: point out {topic} and show the fix with numbers for table t{w}_{i}.")


def queries(n):
    return [f"Question {i}: is {['an ORM loop', 'this pagination', 'a wide SELECT', 'the IN list'][i % 4]} "
            f"slow for table t{i}?" for i in range(n)]


PASSAGES = ["Batch the ORM queries instead of one query per row.", "Use keyset pagination, not OFFSET.",
            "Select only the columns you need.", "Index foreign keys that are joined on."]


def writer_statements(w):
    """What writer w sends: one note alone, then twelve in one statement (one chunk of the trigger's batch)."""
    single = [note(w, 0)]
    multi = [note(w, i) for i in range(1, 13)]
    return [single, multi]


def insert(conn, rows):
    values = ", ".join(["(%s, %s, %s, %s)"] * len(rows))
    params = [x for (t, w, c) in rows for x in (t, w, c, f"Lesson: {c[:60]}")]
    conn.execute(f"INSERT INTO feedback_notes (task_type, wrong_answer, correction, lesson) VALUES {values}", params)


def reader_work(conn, qs):
    out = {}
    for q in qs:
        out[q] = (vec(one(conn, "SELECT fb_embed_query(%s)::text", (q,))),
                  one(conn, "SELECT fb_rerank(%s, %s)", (q, PASSAGES)))
        conn.execute("SELECT count(*) FROM fb_retrieve(%s, %s)", (q, TASK)).fetchone()
    return out


def stored(conn):
    return {h: vec(e) for h, e in conn.execute("SELECT content_hash, embedding::text FROM feedback_notes")}


def setup_database(db, mode):
    fresh_database(PORT, db)
    with connect(db) as c:
        c.execute(f"ALTER DATABASE {db} SET pg_feedback.dup_threshold = 1")
        c.execute(f"ALTER DATABASE {db} SET pg_feedback.inference = '{mode}'")


def worker_row(conn):
    return conn.execute("SELECT pid, restarts, loaded_models, queue_depth, in_flight, requests, errors, "
                        "requests_per_batch, texts_per_run FROM feedback_worker").fetchone()


def test_onnx_runtime_lives_only_in_the_worker():
    fresh_database(PORT, DB)
    with connect() as c:
        assert one(c, "SELECT mode FROM feedback_worker") == "worker"
        c.execute("SELECT fb_embed_query('load nothing here'), fb_rerank('q', ARRAY['p'])")
        pid, restarts, models, *_ = worker_row(c)
        key = one(c, "SELECT fb_embedding_model()")
        assert f"embedding: {key}" in models and any(m.startswith(f"cross-encoder: {CE}@") for m in models), models
        backend = one(c, "SELECT pg_backend_pid()")
        assert "libonnxruntime" not in Path(f"/proc/{backend}/maps").read_text(), "the backend loaded ONNX Runtime"
        assert "libonnxruntime" in Path(f"/proc/{pid}/maps").read_text(), "the worker has no ONNX Runtime"
        stats = one(c, "SELECT loaded_embedding_models + loaded_cross_encoders FROM fb_model_stats()")
        assert stats == 0, f"the backend holds {stats} model sessions"
    # Every thread but the worker's main thread is a model thread: all signals blocked there.
    # Every thread but the worker's main thread is a model thread: Postgres' signals are blocked there.
    pg_signals = [1, 2, 10, 12, 14, 15, 23]   # SIGHUP, SIGINT, SIGUSR1, SIGUSR2, SIGALRM, SIGTERM, SIGURG
    needed = sum(1 << (s - 1) for s in pg_signals)
    masks = {t.name: int(next(l.split()[1] for l in (t / "status").read_text().splitlines()
                              if l.startswith("SigBlk")), 16) for t in Path(f"/proc/{pid}/task").iterdir()}
    others = {tid: m for tid, m in masks.items() if tid != str(pid)}
    assert others, f"no model threads in the worker: {masks}"
    assert all(m & needed == needed for m in others.values()), {t: hex(m) for t, m in masks.items()}
    assert not masks[str(pid)] & (1 << 14), "the worker's main thread blocks SIGTERM while idle"
    print(f"# worker pid {pid}: {len(others)} model threads with signals blocked; backend maps no libonnxruntime",
          flush=True)


def test_32_sessions_get_the_vectors_of_backend_mode():
    setup_database(DB, "worker")
    setup_database(REF, "backend")
    qs = queries(16)
    results, errors = {}, []

    def writer(w):
        try:
            with connect(user=WRITER) as c:
                for rows in writer_statements(w):
                    insert(c, rows)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    def reader(r):
        try:
            with connect() as c:
                results.update(reader_work(c, qs[r:r + 1] * 2))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(16)]
    threads += [threading.Thread(target=reader, args=(r,)) for r in range(16)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    elapsed = time.perf_counter() - started
    assert not any(t.is_alive() for t in threads), "a session hung"
    assert not errors, errors[:3]

    # The same statements, one session, models in the backend.
    with connect(REF, WRITER) as c:
        assert one(c, "SELECT mode FROM feedback_worker") == "backend"
        for w in range(16):
            for rows in writer_statements(w):
                insert(c, rows)
    with connect(REF) as c:
        reference = reader_work(c, qs)
        want = stored(c)
    with connect() as c:
        got = stored(c)
        requests = one(c, "SELECT requests FROM feedback_worker")
    assert sorted(got) == sorted(want) and len(got) == 16 * 13, (len(got), len(want))
    note_cos = min(cosine(got[h], want[h]) for h in want)
    query_cos = min(cosine(results[q][0], reference[q][0]) for q in qs)
    score_diff = max(abs(a - b) for q in qs for a, b in zip(results[q][1], reference[q][1]))
    print(f"# 32 sessions in {elapsed:.1f} s ({requests} worker requests so far): {len(got)} notes, min cosine to "
          f"backend mode {note_cos:.6f}; {len(qs)} queries, min cosine {query_cos:.6f}; rerank max |diff| "
          f"{score_diff:.5f} logits", flush=True)
    assert note_cos >= 0.999 and query_cos >= 0.999, (note_cos, query_cos)
    assert score_diff < 0.01, score_diff


def set_system(conn, name, value):
    conn.execute(f"ALTER SYSTEM SET {name} = {value}" if value is not None else f"ALTER SYSTEM RESET {name}")
    conn.execute("SELECT pg_reload_conf()")
    time.sleep(0.5)


def test_merged_requests_share_model_runs():
    """With batch_merge on, concurrent sessions' requests share runs; their vectors move by the int8 run effect."""
    qs = queries(16)
    with connect() as admin:
        set_system(admin, "pg_feedback.batch_merge", "on")
        set_system(admin, "pg_feedback.batch_wait", "'5ms'")
        try:
            assert one(admin, "SELECT merge_requests FROM feedback_worker") is True
            before = admin.execute("SELECT batches, requests, model_runs, texts FROM feedback_worker").fetchone()
            got, barrier = {}, threading.Barrier(16)

            def reader(q):
                with connect() as c:
                    c.execute("SET pg_feedback.query_cache_size = 0")
                    barrier.wait()
                    got[q] = vec(one(c, "SELECT fb_embed_query(%s)::text", (q,)))

            threads = [threading.Thread(target=reader, args=(q,)) for q in qs]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            after = admin.execute("SELECT batches, requests, model_runs, texts FROM feedback_worker").fetchone()
        finally:
            set_system(admin, "pg_feedback.batch_merge", None)
            set_system(admin, "pg_feedback.batch_wait", None)
    with connect(REF) as c:
        alone = {q: vec(one(c, "SELECT fb_embed_query(%s)::text", (q,))) for q in qs}
    batches, requests, runs, texts = (a - b for a, b in zip(after, before))
    low = min(cosine(got[q], alone[q]) for q in qs)
    print(f"# batch_merge on: 16 concurrent queries in {batches} batches, {runs} model runs "
          f"({texts / max(runs, 1):.1f} texts per run); min cosine to the query embedded alone {low:.4f}", flush=True)
    assert requests == 16 and runs < 16, (batches, requests, runs)
    assert low > 0.98, low


def broken_model_dir():
    """A copy of the installed bge-small whose ONNX graph is truncated (its manifest still lists the good checksum),
    readable by the server."""
    src = Path(os.environ["FB_MODEL_DIR"]) / BGE
    dst = Path(tempfile.mkdtemp(prefix="fb_broken_models_"))
    shutil.copytree(src, dst / BGE)
    graph = max((dst / BGE).glob("*.onnx"), key=lambda p: p.stat().st_size)
    data = graph.read_bytes()
    graph.write_bytes(data[: len(data) // 3])
    for p in [dst, dst / BGE, *(dst / BGE).iterdir()]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return dst


def test_a_lone_run_on_idle_cores_gives_the_same_vectors():
    """One session alone: its embedding runs use pg_feedback.worker_idle_threads (one per CPU by default). The
    vectors are the very same as with one thread, a long code input included, and the view lists each model once."""
    fresh_database(PORT, DB)
    code = "\n".join(f"    rows = db.execute(f\"SELECT * FROM t{i} WHERE id = {{uid}}\")  # line {i}" for i in range(25))
    texts = ["is this query injectable?", code]

    def vectors(c):
        c.execute("SET pg_feedback.query_cache_size = 0")
        return [one(c, "SELECT fb_embed_batch(%s, false)::text", (texts,)),
                one(c, "SELECT fb_embed_query(%s)::text", (code,))]

    with connect() as c:
        try:
            set_system(c, "pg_feedback.worker_idle_threads", 1)
            with connect() as s:
                one_thread = vectors(s)
            set_system(c, "pg_feedback.worker_idle_threads", None)
            with connect() as s:
                idle = vectors(s)
        finally:
            set_system(c, "pg_feedback.worker_idle_threads", None)
        models = worker_row(c)[2]
    assert idle == one_thread, "a run on the idle cores gave other vectors"
    assert len(models) == len(set(models)), models
    print(f"# {len(texts)} texts and a 25-line query: the same vectors with 1 thread and with the idle cores",
          flush=True)


def test_a_model_error_fails_only_its_requests():
    fresh_database(PORT, DB)
    broken = broken_model_dir()
    try:
        with connect() as bad, connect() as good:
            errors_before = one(bad, "SELECT errors FROM feedback_worker")
            bad.execute("SELECT set_config('pg_feedback.model_dir', %s, false)", (str(broken),))
            done = []
            t = threading.Thread(target=lambda: done.append(
                [one(good, "SELECT vector_dims(fb_embed(%s))", (f"good {i}",)) for i in range(20)]))
            t.start()
            for _ in range(3):
                try:
                    bad.execute("SELECT fb_embed_batch(ARRAY['x', 'y'], false, %s)", (BGE,))
                    raise AssertionError("a truncated model embedded")
                except psycopg.Error as e:
                    assert e.sqlstate == "XX001", (e.sqlstate, str(e))
                    assert e.diag.message_hint and "reinstall" in e.diag.message_hint, e.diag.message_hint
            t.join(60)
            assert done == [[384] * 20], "a concurrent session's requests failed too"
            bad.execute("RESET pg_feedback.model_dir")
            assert one(bad, "SELECT vector_dims(fb_embed('the next call works'))") == 384
            errors = one(bad, "SELECT errors FROM feedback_worker") - errors_before
            assert errors == 3, f"worker errors {errors}"
        print(f"# model error: 3 requests failed with XX001 and a hint, 20 concurrent requests succeeded", flush=True)
    finally:
        shutil.rmtree(broken, ignore_errors=True)


def wait_for_worker(conn, old_pid, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        pid = one(conn, "SELECT pid FROM feedback_worker")
        if pid and pid != old_pid:
            return pid
        time.sleep(0.1)
    raise AssertionError(f"no new worker within {timeout} s")


def test_sigterm_mid_load_leaves_no_hung_session():
    fresh_database(PORT, DB)
    with connect() as admin:
        pid, restarts = one(admin, "SELECT pid, restarts FROM feedback_worker")
        assert one(admin, "SELECT backend_type FROM pg_stat_activity WHERE pid = %s", (pid,)) == \
            "pg_feedback inference", "the worker is not in pg_stat_activity"
        outcome, reader_calls = {}, []

        def loader():
            with connect() as c:
                c.execute("SET application_name = 'fb_sigterm_loader'")
                t0 = time.perf_counter()
                try:
                    c.execute("INSERT INTO feedback_notes (task_type, wrong_answer, correction, lesson) "
                              "SELECT 'perf_review', 'wrong ' || g, 'Correction number ' || g || ' about indexes.', "
                              "'Lesson ' || g FROM generate_series(1, 3000) g")
                    outcome["loader"] = ("committed", time.perf_counter() - t0)
                except psycopg.Error as e:
                    outcome["loader"] = (e.sqlstate, time.perf_counter() - t0, e.diag.message_hint)

        def reader():
            with connect() as c:
                c.execute("SET pg_feedback.query_cache_size = 0")
                end = time.time() + 6
                while time.time() < end:
                    t0 = time.perf_counter()
                    try:
                        c.execute("SELECT fb_embed_query('is this index used?')")
                        reader_calls.append(("ok", time.perf_counter() - t0))
                    except psycopg.Error as e:
                        reader_calls.append((e.sqlstate, time.perf_counter() - t0))

        threads = [threading.Thread(target=loader), threading.Thread(target=reader)]
        for t in threads:
            t.start()
        # Kill the worker while it runs the load's model work: the insert cleans and screens its 3,000 rows first,
        # so wait until the loader waits on the worker (wait event type Extension), not a fixed delay.
        deadline = time.monotonic() + 60
        while not one(admin, "SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = 'fb_sigterm_loader'"
                             " AND wait_event_type = 'Extension'"):
            assert time.monotonic() < deadline and "loader" not in outcome, f"the load never reached the worker: {outcome}"
            time.sleep(0.02)
        time.sleep(0.3)
        try:
            assert one(admin, "SELECT pg_terminate_backend(%s)", (pid,)) is True, "pg_terminate_backend refused"
        finally:
            killed = time.perf_counter()
            for t in threads:
                t.join(60)
        assert not any(t.is_alive() for t in threads), "a session hung"
        state, took, *hint = outcome["loader"]
        assert state == "58000" and hint and "Retry" in hint[0], outcome
        new_pid = wait_for_worker(admin, pid)
        back = time.perf_counter() - killed
        assert one(admin, "SELECT restarts FROM feedback_worker") == restarts + 1
        assert one(admin, "SELECT count(*) FROM feedback_notes") == 0, "a part of the killed load was stored"
        assert one(admin, "SELECT vector_dims(fb_embed_query('the worker is back'))") == 384
        slowest = max(t for _, t in reader_calls)
        failed = sum(1 for s, _ in reader_calls if s != "ok")
        assert slowest < 10, f"a reader waited {slowest:.1f} s"
    print(f"# SIGTERM mid-load: loader ERROR 58000 after {took:.1f} s, nothing stored; reader: {len(reader_calls)} "
          f"calls, {failed} failed, slowest {slowest * 1000:.0f} ms; new worker {new_pid} after {back:.1f} s",
          flush=True)


def cancelled_within(cancel):
    """Seconds from cancel() to the ERROR in a session that waits on the worker behind another session's load."""
    texts = [f"bulk text {i} about pagination and indexes" for i in range(1500)]
    bulk = "SELECT count(*) FROM unnest(fb_embed_batch(%s::text[], false))"
    with connect() as busy, connect() as victim, connect() as admin:
        busy_pid = one(busy, "SELECT pg_backend_pid()")
        victim_pid = one(victim, "SELECT pg_backend_pid()")

        def run_busy():
            try:
                busy.execute(bulk, (texts,))
            except psycopg.Error:
                pass

        t_busy = threading.Thread(target=run_busy)
        t_busy.start()
        time.sleep(0.5)
        result = {}

        def run():
            try:
                victim.execute(bulk, (texts,))
                result["state"] = "finished"
            except psycopg.Error as e:
                result["state"] = e.sqlstate
            result["at"] = time.perf_counter()

        t = threading.Thread(target=run)
        t.start()
        time.sleep(0.5)
        started = cancel(admin, victim_pid)
        t.join(30)
        admin.execute("SELECT pg_cancel_backend(%s)", (busy_pid,))
        t_busy.join(30)
        assert result["state"] == "57014", result
        # No slot left behind.
        deadline = time.time() + 10
        while one(admin, "SELECT queue_depth + in_flight FROM feedback_worker") and time.time() < deadline:
            time.sleep(0.05)
        assert one(admin, "SELECT queue_depth + in_flight FROM feedback_worker") == 0, "a request slot leaked"
        assert one(victim, "SELECT vector_dims(fb_embed_query('after the cancel'))") == 384
        return result["at"] - started


def test_a_cancelled_wait_returns_within_100_ms():
    fresh_database(PORT, DB)

    def by_cancel(admin, pid):
        t0 = time.perf_counter()
        admin.execute("SELECT pg_cancel_backend(%s)", (pid,))
        return t0

    took = [cancelled_within(by_cancel) for _ in range(3)]
    print(f"# pg_cancel_backend while waiting on the worker: returned after "
          f"{', '.join(f'{t * 1000:.1f}' for t in took)} ms", flush=True)
    assert max(took) < 0.1, took


def test_statement_timeout_while_waiting():
    fresh_database(PORT, DB)
    with connect() as busy, connect() as victim:
        texts = [f"bulk text {i} about pagination and indexes" for i in range(1500)]
        t_busy = threading.Thread(target=lambda: busy.execute(
            "SELECT count(*) FROM unnest(fb_embed_batch(%s::text[], false))", (texts[:600],)))
        t_busy.start()
        time.sleep(0.3)
        victim.execute("SET statement_timeout = '400ms'")
        t0 = time.perf_counter()
        try:
            victim.execute("SELECT count(*) FROM unnest(fb_embed_batch(%s::text[], false))", (texts,))
            raise AssertionError("finished inside the timeout")
        except psycopg.Error as e:
            assert e.sqlstate == "57014", e.sqlstate
        took = time.perf_counter() - t0
        t_busy.join(60)
        victim.execute("RESET statement_timeout")
        assert one(victim, "SELECT vector_dims(fb_embed_query('after the timeout'))") == 384
    print(f"# statement_timeout 400 ms while waiting on the worker: ERROR after {took * 1000:.0f} ms", flush=True)
    assert took < 0.5, took


if __name__ == "__main__":
    with _connect(PORT, "postgres") as c:
        c.execute(f"DO $$ BEGIN CREATE ROLE {WRITER} LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
    fresh_database(PORT, DB)
    with connect() as c:
        c.execute(f"GRANT feedback_writer TO {WRITER}")
    tests = [test_onnx_runtime_lives_only_in_the_worker, test_32_sessions_get_the_vectors_of_backend_mode,
             test_merged_requests_share_model_runs, test_a_lone_run_on_idle_cores_gives_the_same_vectors,
             test_a_model_error_fails_only_its_requests,
             test_sigterm_mid_load_leaves_no_hung_session, test_a_cancelled_wait_returns_within_100_ms,
             test_statement_timeout_while_waiting]
    run_tests("worker", [t for t in tests if not ONLY or t.__name__ in ONLY])

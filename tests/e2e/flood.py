"""End-to-end: every path to a tokenizer or a model is capped and cancellable, through real sessions of the
least-privileged role that can make the calls (a login role granted feedback_reader).

Run by make test in both inference modes:
    python tests/e2e/flood.py PORT PG_BINDIR [test_name ...]

- Every capped function refuses a text over pg_feedback.max_input_bytes and a call over
  pg_feedback.max_call_bytes with SQLSTATE 54000 and a HINT, before any work (the refusal takes no model time and
  the backend's model counters do not move).
- Two big requests cancelled by statement_timeout stop in the worker: another session's fb_embed right after
  returns promptly (a generous bound: the figures are in BENCHMARKS.md, "Flood"), and the worker is the same
  process afterwards.
"""

import sys
import threading
import time

import psycopg

from harness import connect as _connect, fresh_database, one, run_tests

PORT = int(sys.argv[1])
ONLY = sys.argv[3:]
DB = "fb_flood_e2e"
READER = "fb_flood_r"
# Readers hold no internal function of retrieval (fb_retrieve and fb_build_prompt run as the extension owner); the
# caps must hold whoever can call one all the same, so a role an administrator granted them checks those.
INTERNAL = "fb_flood_internal"
INTERNAL_FUNCTIONS = "_fb_rerank_selective(text, text[], real[], jsonb), " \
                     "_fb_build_prompt(text, text[], text[], integer)"
# Small caps for the test (set per database by the superuser), so over-cap calls stay cheap to send.
TEXT_CAP = 16 * 1024
CALL_CAP = 256 * 1024


def connect(user=READER):
    return _connect(PORT, DB, user)


def setup():
    fresh_database(PORT, DB)
    with _connect(PORT, DB) as c:
        c.execute("SET client_min_messages = warning")
        c.execute(f"DROP ROLE IF EXISTS {READER}")
        c.execute(f"CREATE ROLE {READER} LOGIN")
        c.execute(f"GRANT feedback_reader TO {READER}")
        c.execute(f"DROP ROLE IF EXISTS {INTERNAL}")
        c.execute(f"CREATE ROLE {INTERNAL} LOGIN")
        c.execute(f"GRANT feedback_reader TO {INTERNAL}")
        c.execute(f"GRANT EXECUTE ON FUNCTION {INTERNAL_FUNCTIONS} TO {INTERNAL}")
        c.execute(f"ALTER DATABASE {DB} SET pg_feedback.max_input_bytes = {TEXT_CAP}")
        c.execute(f"ALTER DATABASE {DB} SET pg_feedback.max_call_bytes = {CALL_CAP}")


def mode():
    with connect() as c:
        return one(c, "SELECT mode FROM feedback_worker")


def user_for(sql):
    return INTERNAL if "_fb_rerank_selective" in sql or "_fb_build_prompt" in sql else READER


def refused(sql, params, what):
    """Runs sql as the reader (or, for an internal function, a role granted it); it must fail with 54000, a HINT
    naming the setting, a message naming the value and the limit, quickly and without any model work in this
    backend."""
    with connect(user_for(sql)) as c:
        before = one(c, "SELECT (embed_runs, rerank_runs) FROM fb_model_stats()")
        t0 = time.perf_counter()
        try:
            c.execute(sql, params)
        except psycopg.Error as e:
            elapsed = time.perf_counter() - t0
            assert e.sqlstate == "54000", f"{what}: {e.sqlstate} {e.diag.message_primary}"
            assert e.diag.message_hint, f"{what}: no HINT"
            limit = str(TEXT_CAP) if "max_input_bytes" in e.diag.message_primary else str(CALL_CAP)
            assert limit in e.diag.message_primary and "bytes" in e.diag.message_primary, e.diag.message_primary
            assert "pg_feedback.max_" in e.diag.message_hint, e.diag.message_hint
            assert elapsed < 1.0, f"{what}: refused only after {elapsed:.2f} s"
            after = one(c, "SELECT (embed_runs, rerank_runs) FROM fb_model_stats()")
            assert after == before, f"{what}: model work before the refusal {before} -> {after}"
            return e.diag.message_primary
        raise AssertionError(f"{what}: not refused")


BIG = "word " * (TEXT_CAP // 5 + 10)              # one text over max_input_bytes
PIECE = "word " * (TEXT_CAP // 5 - 20)            # under it; 20 of them are over max_call_bytes
MANY = [f"{i} {PIECE}" for i in range(CALL_CAP // len(PIECE) + 2)]


def test_every_capped_function_refuses_an_oversized_text():
    cases = [
        ("fb_embed", "SELECT fb_embed(%s)", (BIG,)),
        ("fb_embed_query", "SELECT fb_embed_query(%s)", (BIG,)),
        ("fb_embed_batch", "SELECT cardinality(fb_embed_batch(%s))", (["ok", BIG],)),
        ("_fb_embed_with", "SELECT count(*) FROM _fb_embed_with(_fb_active_model(), %s, true)", ([BIG],)),
        ("fb_rerank query", "SELECT fb_rerank(%s, ARRAY['p'])", (BIG,)),
        ("fb_rerank passage", "SELECT fb_rerank('q', %s)", (["p", BIG],)),
        ("_fb_rerank_selective", "SELECT _fb_rerank_selective('q', %s, ARRAY[0.9, 0.8]::real[])", (["p", BIG],)),
        ("fb_count_tokens", "SELECT fb_count_tokens(%s)", (BIG,)),
        ("_fb_build_prompt lesson", "SELECT _fb_build_prompt('', %s, ARRAY['x'], 2000000000)", ([BIG],)),
        ("_fb_build_prompt correction", "SELECT _fb_build_prompt('', ARRAY['x'], %s, 800)", ([BIG],)),
        ("fb_retrieve", "SELECT count(*) FROM fb_retrieve(%s, 'code_review')", (BIG,)),
        ("fb_build_prompt", "SELECT fb_build_prompt(%s, 'code_review')", (BIG,)),
        ("fb_find_duplicate", "SELECT count(*) FROM fb_find_duplicate('code_review', %s)", (BIG,)),
    ]
    for what, sql, params in cases:
        msg = refused(sql, params, what)
        assert "max_input_bytes" in msg, f"{what}: {msg}"


def test_every_capped_function_refuses_an_oversized_call():
    cases = [
        ("fb_embed_batch", "SELECT cardinality(fb_embed_batch(%s))", (MANY,)),
        ("_fb_embed_with", "SELECT count(*) FROM _fb_embed_with(_fb_active_model(), %s, false)", (MANY,)),
        ("fb_rerank", "SELECT fb_rerank('q', %s)", (MANY,)),
        # The query counts once per pair: a mid-sized query over many short passages is over the total.
        ("fb_rerank pairs", "SELECT fb_rerank(%s, %s)", (PIECE, ["p"] * 20)),
        ("_fb_rerank_selective", "SELECT _fb_rerank_selective('q', %s, %s::real[])", (MANY, [0.5] * len(MANY))),
        ("_fb_build_prompt", "SELECT _fb_build_prompt('', %s, %s, 2000000000)", (MANY, MANY)),
    ]
    for what, sql, params in cases:
        msg = refused(sql, params, what)
        assert "max_call_bytes" in msg, f"{what}: {msg}"


def test_internal_functions_are_not_the_readers():
    with connect() as c:
        for sql in ("SELECT _fb_build_prompt('', ARRAY['x'], ARRAY['x'], 800)",
                    "SELECT _fb_rerank_selective('q', ARRAY['p'], ARRAY[0.9]::real[])"):
            try:
                c.execute(sql)
            except psycopg.Error as e:
                assert e.sqlstate == "42501", e
            else:
                raise AssertionError(f"a reader may run {sql}")


def test_calls_within_the_caps_still_work():
    with connect() as c:
        assert one(c, "SELECT cardinality(fb_embed_batch(%s))", (MANY[:8],)) == 8
        assert len(one(c, "SELECT fb_rerank('q', %s)", (MANY[:4],))) == 4
        assert one(c, "SELECT fb_count_tokens(%s)", (PIECE,)) > 3000
    with connect(INTERNAL) as c:
        p = one(c, "SELECT _fb_build_prompt('Review.', %s, %s, 800)",
                (["always set a timeout", PIECE], ["requests.get(url, timeout=10)", "x"]))
        assert "1. always set a timeout" in p and "word word" not in p, p


def test_the_red_team_prompt_call_is_refused():
    with connect(INTERNAL) as c:
        try:
            c.execute("SELECT _fb_build_prompt('', ARRAY[repeat('word ', 800000)], ARRAY['x'], 2000000000)")
        except psycopg.Error as e:
            assert e.sqlstate == "54000" and e.diag.message_hint, e
        else:
            raise AssertionError("a 4 MB lesson was accepted")


def test_cancelled_big_requests_stop_in_the_worker():
    # Two calls at the caps, cancelled by statement_timeout while the worker runs them, then another session's
    # tiny fb_embed: it must not wait for the cancelled work.
    # Many ~120-token texts up to the call cap: seconds of model work whatever the pair or token limits, so the
    # 300 ms timeout always falls while the worker runs them (16 texts cut to the model's limit could finish first).
    big_batch = [f"{i} " + "word " * 120 for i in range(CALL_CAP // 620)]
    errors = []

    def flood(n):
        with connect() as c:
            c.execute("SET statement_timeout = '300ms'")
            try:
                if n == 0:
                    c.execute("SELECT cardinality(fb_embed_batch(%s))", (big_batch,))
                else:
                    c.execute("SELECT fb_rerank('q', %s)", (big_batch,))
                errors.append(f"call {n} was not cancelled")
            except psycopg.errors.QueryCanceled:
                pass

    with _connect(PORT, DB) as victim:
        victim.execute("SELECT fb_embed('warm up')")
        worker_pid = one(victim, "SELECT pid FROM feedback_worker")
        threads = [threading.Thread(target=flood, args=(n,)) for n in range(2)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        cancelled_after = time.perf_counter() - t0
        assert not errors, errors
        assert cancelled_after < 3, f"the cancelled calls returned only after {cancelled_after:.1f} s"
        t0 = time.perf_counter()
        assert one(victim, "SELECT fb_embed('a tiny note') IS NOT NULL")
        took = time.perf_counter() - t0
        assert took < 3, f"fb_embed after two cancelled big requests took {took:.2f} s"
        assert one(victim, "SELECT pid FROM feedback_worker") == worker_pid, "the worker restarted"
        if worker_pid is not None:
            # Nothing left running or queued in the worker for the cancelled calls.
            def idle():
                return one(victim, "SELECT queue_depth = 0 AND in_flight = 0 FROM feedback_worker")
            deadline = time.monotonic() + 3
            while not idle():
                assert time.monotonic() < deadline, "the worker still holds the cancelled requests"
                time.sleep(0.05)


def test_the_worker_survives_a_flood_of_cancelled_calls():
    stop = threading.Event()

    def flood(n):
        with connect() as c:
            i = n
            while not stop.is_set():
                c.execute(f"SET statement_timeout = '{100 + 50 * (i % 4)}ms'")
                try:
                    c.execute("SELECT cardinality(fb_embed_batch(%s))", ([f"{i} {k} {PIECE}" for k in range(12)],))
                except psycopg.errors.QueryCanceled:
                    pass
                i += 1

    threads = [threading.Thread(target=flood, args=(n,)) for n in range(3)]
    with _connect(PORT, DB) as victim:
        pid = one(victim, "SELECT pid FROM feedback_worker")
        for t in threads:
            t.start()
        try:
            slowest = 0.0
            for i in range(10):
                t0 = time.perf_counter()
                one(victim, "SELECT fb_embed(%s) IS NOT NULL", (f"tiny note {i}",))
                slowest = max(slowest, time.perf_counter() - t0)
                time.sleep(0.2)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=60)
        assert slowest < 3, f"the slowest fb_embed during the flood took {slowest:.2f} s"
        assert one(victim, "SELECT pid FROM feedback_worker") == pid, "the worker restarted"
        assert one(victim, "SELECT fb_embed('after') IS NOT NULL")


if __name__ == "__main__":
    setup()
    print(f"# inference mode: {mode()}", flush=True)
    tests = [test_every_capped_function_refuses_an_oversized_text, test_every_capped_function_refuses_an_oversized_call,
             test_internal_functions_are_not_the_readers, test_calls_within_the_caps_still_work,
             test_the_red_team_prompt_call_is_refused,
             test_cancelled_big_requests_stop_in_the_worker, test_the_worker_survives_a_flood_of_cancelled_calls]
    run_tests("flood", [t for t in tests if not ONLY or t.__name__ in ONLY])

"""End-to-end, real sessions: concurrent ingests of the same note or of near-duplicates never both insert, under
READ COMMITTED (they wait for each other), REPEATABLE READ and SERIALIZABLE (the later one fails with a
serialization failure and a hint, and its retry merges); and 16 writers ingesting 10,000 notes by INSERT, COPY and
fb_ingest while 4 sessions retrieve.

Run by make test against the end-to-end server: python tests/e2e/concurrent_ingest.py PORT
"""

import functools
import random
import re
import statistics
import sys
import threading
import time
from pathlib import Path

import psycopg

from harness import connect as _connect, fresh_database, one, run_tests

PORT = int(sys.argv[1])
DB = "fb_concurrency"
LESSON = "A secret deleted in a later commit is still leaked: rotate it."
NEAR = "A secret removed in a later commit is still leaked; rotate it."


def connect(db=DB, autocommit=True):
    return _connect(PORT, db, autocommit=autocommit)


def ingest(conn, task_type, lesson, correction="Rotate the key."):
    return conn.execute("SELECT id, action FROM fb_ingest(%s, '', %s, %s)", (task_type, correction, lesson)).fetchone()


def count(conn, task_type):
    return conn.execute("SELECT count(*) FROM feedback_notes WHERE task_type = %s", (task_type,)).fetchone()[0]


def test_second_session_waits_then_merges():
    a, b, check = connect(autocommit=False), connect(), connect()
    first_id, first_action = ingest(a, "t_wait", LESSON)          # A's transaction stays open
    result = {}
    t = threading.Thread(target=lambda: result.update(b=ingest(b, "t_wait", NEAR)))
    t.start()
    time.sleep(1.5)
    assert t.is_alive(), "B must wait for A's near-duplicate check lock"
    a.commit()
    t.join(30)
    assert first_action == "inserted", first_action
    assert result["b"] == (first_id, "merged"), result
    assert count(check, "t_wait") == 1


def race(task_type, lessons):
    """Both sessions ingest at the same moment; returns their (id, action)."""
    barrier = threading.Barrier(len(lessons))
    results = [None] * len(lessons)

    def run(i):
        with connect() as c:
            barrier.wait()
            results[i] = ingest(c, task_type, lessons[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(lessons))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_simultaneous_near_duplicates_insert_once():
    with connect() as check:
        for round_ in range(5):
            task_type = f"t_race_{round_}"
            results = race(task_type, [LESSON, NEAR])
            actions = sorted(r[1] for r in results)
            assert actions == ["inserted", "merged"], (round_, results)
            assert len({r[0] for r in results}) == 1, results
            assert count(check, task_type) == 1


def test_simultaneous_identical_notes_insert_once():
    with connect() as check:
        results = race("t_same", [LESSON, LESSON, LESSON])
        assert sorted(r[1] for r in results) == ["inserted", "updated", "updated"], results
        assert count(check, "t_same") == 1
        assert check.execute("SELECT report_count FROM feedback_notes WHERE task_type = 't_same'").fetchone()[0] == 3


ISOLATION_LEVELS = ["REPEATABLE READ", "SERIALIZABLE"]


def expect_serialization_failure(conn, statement):
    try:
        statement()
    except psycopg.Error as e:
        conn.execute("ROLLBACK")
        assert e.sqlstate == "40001", (e.sqlstate, str(e))
        assert e.diag.message_hint and "Retry the transaction" in e.diag.message_hint, e.diag.message_hint
        return
    raise AssertionError("no serialization failure")


def test_repeatable_read_and_serializable_never_store_a_silent_duplicate():
    """A transaction whose snapshot predates another's ingest into the same task_type cannot see that note: its
    near-duplicate check fails with 40001 and a hint instead of storing a duplicate, and the retry merges. An exact
    re-submission fails the same way through fb_ingest; a plain INSERT meets the content hash (23505)."""
    for level in ISOLATION_LEVELS:
        task_type = "t_iso_" + level.split()[0].lower()
        with connect() as a, connect() as b, connect() as check:   # a: explicit BEGIN / COMMIT
            ingest(b, task_type, "Unrelated: the cache must be bounded in size.")   # the task_type exists
            # Near-duplicate, committed by b after a's snapshot.
            a.execute(f"BEGIN ISOLATION LEVEL {level}")
            a.execute("SELECT 1")
            first_id, action = ingest(b, task_type, LESSON)
            assert action == "inserted", action
            expect_serialization_failure(a, lambda: ingest(a, task_type, NEAR))
            a.execute(f"BEGIN ISOLATION LEVEL {level}")
            assert ingest(a, task_type, NEAR) == (first_id, "merged"), level
            a.execute("COMMIT")
            # The same content, committed by b after a's snapshot: fb_ingest and a plain INSERT.
            lesson = "Retries of a failed payment must reuse the idempotency key."
            a.execute(f"BEGIN ISOLATION LEVEL {level}")
            a.execute("SELECT 1")
            same_id, action = ingest(b, task_type, lesson)
            expect_serialization_failure(a, lambda: ingest(a, task_type, lesson))
            a.execute(f"BEGIN ISOLATION LEVEL {level}")
            assert ingest(a, task_type, lesson) == (same_id, "updated"), level
            a.execute("COMMIT")
            a.execute(f"BEGIN ISOLATION LEVEL {level}")
            a.execute("SELECT 1")
            lesson2 = "A webhook handler must verify the signature before parsing the body."
            ingest(b, task_type, lesson2)
            try:
                a.execute("INSERT INTO feedback_notes (task_type, correction, lesson) VALUES (%s, 'Rotate the key.', %s)",
                          (task_type, lesson2))
                raise AssertionError("a plain INSERT of stored content went through")
            except psycopg.errors.UniqueViolation:
                a.execute("ROLLBACK")
            # Two transactions of this level at once, neither snapshot older than the other's start: one waits
            # for the other's lock, then fails; its retry merges.
            lesson3 = "Log lines must not contain the session cookie."
            near3 = "Log lines must never contain the session cookie."
            c2 = connect()
            a.execute(f"BEGIN ISOLATION LEVEL {level}")
            c2.execute(f"BEGIN ISOLATION LEVEL {level}")
            a.execute("SELECT 1")
            c2.execute("SELECT 1")
            ingest(a, task_type, lesson3)
            outcome = {}

            def second():
                try:
                    outcome["result"] = ingest(c2, task_type, near3)
                    c2.execute("COMMIT")
                except psycopg.Error as e:
                    c2.execute("ROLLBACK")
                    outcome["error"] = (e.sqlstate, e.diag.message_hint)

            t = threading.Thread(target=second)
            t.start()
            time.sleep(1.0)
            assert t.is_alive(), "the second transaction must wait for the first one's lock"
            a.execute("COMMIT")
            t.join(30)
            assert outcome.get("error", (None,))[0] == "40001", outcome
            c2.execute(f"BEGIN ISOLATION LEVEL {level}")
            assert ingest(c2, task_type, near3)[1] == "merged"
            c2.execute("COMMIT")
            c2.close()
            counts = check.execute("SELECT count(*), sum(report_count) FROM feedback_notes WHERE task_type = %s",
                                   (task_type,)).fetchone()
            assert counts == (5, 8), (level, counts)   # unrelated, LESSON (+NEAR), lesson (x2), lesson2 (x1), lesson3 (+near3)


# ---- 16 writers, 10,000 notes, 4 retrievers --------------------------------------------------------------------

WRITERS, RETRIEVERS, SUBMISSIONS = 16, 4, 10_000
RESUBMITTED, NEAR_DUPLICATES = 0.20, 0.10
TASK_TYPES = [f"stress_{i}" for i in range(8)]
WRITER_ROLE, READER_ROLE = "fb_stress_writer", "fb_stress_reader"


def documented(e):
    """Errors a client must be ready for, each documented (README "Concurrency"): a plain INSERT or COPY of content
    that another transaction is storing at the same moment meets it at the content hash (fb_ingest retries that
    itself); two such statements that share several new notes in opposite orders can deadlock there, as with any
    unique key. A deadlock anywhere else is a bug."""
    return e.sqlstate == "23505" or (e.sqlstate == "40P01" and "feedback_notes_content_hash_key" in str(e))


@functools.lru_cache(maxsize=1)
def vocabulary():
    root = Path(__file__).resolve().parents[2]
    words = set()
    for name in ("README.md", "BENCHMARKS.md", "data/sample_notes.csv", "data/golden_questions.csv"):
        words |= {w.lower() for w in re.findall(r"\b[a-zA-Z]{4,12}\b", (root / name).read_text())}
    return sorted(words)


def workload(seed=20261130):
    """10,000 submissions (task_type, correction, lesson, kind) in random order: 70% distinct notes (ten random
    words), 20% exact re-submissions of one of them, 10% near-duplicates of one (the same words, one more)."""
    rng = random.Random(seed)
    words = vocabulary()
    n_resub, n_near = int(SUBMISSIONS * RESUBMITTED), int(SUBMISSIONS * NEAR_DUPLICATES)
    distinct = []
    for _ in range(SUBMISSIONS - n_resub - n_near):
        lesson = " ".join(rng.sample(words, 10)).capitalize() + "."
        distinct.append((rng.choice(TASK_TYPES), f"Correction: {lesson.lower()}", lesson, "distinct"))
    subs = list(distinct)
    subs += [(*rng.choice(distinct)[:3], "resubmitted") for _ in range(n_resub)]
    for _ in range(n_near):
        t, c, lesson, _ = rng.choice(distinct)
        subs.append((t, c, lesson[:-1] + " indeed.", "near"))
    rng.shuffle(subs)
    return subs


def write(conn, mode, batch):
    rows = [(t, "", c, lesson, "stress") for t, c, lesson, _ in batch]
    if mode == "insert":
        values = ", ".join(["(%s, %s, %s, %s, %s)"] * len(rows))
        conn.execute(f"INSERT INTO feedback_notes (task_type, wrong_answer, correction, lesson, source) VALUES {values}",
                     [v for r in rows for v in r])
    elif mode == "copy":
        with conn.cursor().copy("COPY feedback_notes (task_type, wrong_answer, correction, lesson, source) "
                                "FROM STDIN") as copy:
            for r in rows:
                copy.write_row(r)
    else:
        for r in rows:
            conn.execute("SELECT * FROM fb_ingest(%s, %s, %s, %s, %s)", r)


def test_16_writers_ingest_10000_notes_while_4_sessions_retrieve():
    with connect() as su:
        for role, group in ((WRITER_ROLE, "feedback_writer"), (READER_ROLE, "feedback_reader")):
            if not one(su, "SELECT count(*) FROM pg_roles WHERE rolname = %s", (role,)):
                su.execute(f"CREATE ROLE {role} LOGIN")
            su.execute(f"GRANT {group} TO {role}")
        one(su, "SELECT _fb_setting('pg_feedback.dup_threshold')")   # loads the library if need be
        # The near-duplicates here add a word to a stored lesson (cosine about 0.99): the comparison merges every
        # such pair, and two random ten-word lessons are never this close.
        threshold = 0.97
    subs = workload()
    modes = ["insert", "copy", "fb_ingest"]
    batch_size = {"insert": 25, "copy": 100, "fb_ingest": 1}
    errors, retried, done = [], {}, threading.Event()
    lock = threading.Lock()
    retrievals = []

    def writer(w):
        mode = modes[w % 3]
        mine = subs[w::WRITERS]
        with _connect(PORT, DB, user=WRITER_ROLE) as conn:
            for i in range(0, len(mine), batch_size[mode]):
                batch = mine[i:i + batch_size[mode]]
                for attempt in range(20):
                    try:
                        with conn.transaction():
                            write(conn, mode, batch)
                        break
                    except psycopg.Error as e:
                        with lock:
                            retried[e.sqlstate] = retried.get(e.sqlstate, 0) + 1
                            if not documented(e):
                                errors.append((w, mode, e.sqlstate, str(e).splitlines()[0]))
                else:
                    with lock:
                        errors.append((w, mode, "gave up", batch[0][2]))

    def retriever(r):
        rng = random.Random(r)
        words = vocabulary()
        with _connect(PORT, DB, user=READER_ROLE) as conn:
            while not done.is_set():
                q = " ".join(rng.sample(words, 8))
                start = time.monotonic()
                try:
                    conn.execute("SELECT count(*) FROM fb_retrieve(%s, %s)", (q, rng.choice(TASK_TYPES))).fetchone()
                    retrievals.append(time.monotonic() - start)
                except psycopg.Error as e:
                    with lock:
                        errors.append((f"r{r}", "retrieve", e.sqlstate, str(e).splitlines()[0]))

    start = time.monotonic()
    readers = [threading.Thread(target=retriever, args=(r,)) for r in range(RETRIEVERS)]
    writers = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join(1200)
    elapsed = time.monotonic() - start
    done.set()
    for t in readers:
        t.join(60)
    assert not any(t.is_alive() for t in writers), "a writer hung"
    assert not errors, f"{len(errors)} undocumented errors, e.g. {errors[:5]}"

    with connect() as su:
        su.execute("CREATE TEMP TABLE subs (task_type text, correction text, lesson text, kind text)")
        with su.cursor().copy("COPY subs FROM STDIN") as copy:
            for row in subs:
                copy.write_row(row)
        stored, reports, unembedded = su.execute(
            "SELECT count(*), sum(report_count), count(*) FILTER (WHERE embedding IS NULL) FROM feedback_notes "
            "WHERE starts_with(task_type, 'stress_')").fetchone()
        merged_rows = one(su, "SELECT count(*) FROM feedback_note_merges WHERE starts_with(task_type, 'stress_')")
        # Every submitted content is a stored note, or was merged into one.
        lost = one(su, """
            SELECT count(*) FROM (SELECT DISTINCT fb_content_hash(task_type, lesson, correction, NULL) AS h FROM subs) s
             WHERE NOT EXISTS (SELECT 1 FROM feedback_notes f WHERE f.content_hash = s.h)
               AND NOT EXISTS (SELECT 1 FROM feedback_note_merges m WHERE m.merged_hash = s.h)""")
        # No two active notes of a task_type within the near-duplicate threshold (the dedup held).
        pairs = one(su, """
            SELECT count(*) FROM feedback_notes a JOIN feedback_notes b
                ON a.task_type = b.task_type AND a.id < b.id
             WHERE starts_with(a.task_type, 'stress_') AND a.status = 'active' AND b.status = 'active'
               AND 1 - (a.embedding <=> b.embedding) >= %s""", (threshold,))
        distinct = len({(t, c, lesson) for t, c, lesson, _ in subs})
        near_merged = one(su, """
            SELECT count(*) FROM subs s WHERE kind = 'near' AND EXISTS (SELECT 1 FROM feedback_note_merges m
              WHERE m.merged_hash = fb_content_hash(s.task_type, s.lesson, s.correction, NULL))""")
    print(f"# stress: {SUBMISSIONS} submissions ({distinct} distinct contents; 20% exact re-submissions, 10% "
          f"near-duplicates) by {WRITERS} writers (INSERT x25, COPY x100, fb_ingest) in {elapsed:.0f} s "
          f"({SUBMISSIONS / elapsed:.0f} notes/s) while {RETRIEVERS} sessions ran {len(retrievals)} retrievals "
          f"(p50 {1000 * statistics.median(retrievals or [0]):.0f} ms)", flush=True)
    print(f"# stress: stored {stored} notes + {merged_rows} merges; sum(report_count) {reports} (expected "
          f"{SUBMISSIONS}); {near_merged} near-duplicate submissions merged; retried statements by SQLSTATE "
          f"{retried or '{}'}; contents lost {lost}; near-duplicate pairs left {pairs}", flush=True)
    assert reports == SUBMISSIONS, f"report counts add up to {reports}, not {SUBMISSIONS}"
    assert lost == 0 and pairs == 0 and unembedded == 0, (lost, pairs, unembedded)


def main():
    fresh_database(PORT, DB)
    tests = [test_second_session_waits_then_merges, test_simultaneous_near_duplicates_insert_once,
             test_simultaneous_identical_notes_insert_once,
             test_repeatable_read_and_serializable_never_store_a_silent_duplicate,
             test_16_writers_ingest_10000_notes_while_4_sessions_retrieve]
    only = sys.argv[3:]
    run_tests("concurrency", [t for t in tests if not only or t.__name__ in only])


if __name__ == "__main__":
    main()

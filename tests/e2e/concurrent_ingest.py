"""End-to-end, two real sessions: concurrent ingests of the same note or of near-duplicates never both insert.

Run by make test against the end-to-end server: python tests/e2e/concurrent_ingest.py PORT
"""

import sys
import threading
import time

from harness import connect as _connect, fresh_database, run_tests

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


def main():
    fresh_database(PORT, DB)
    run_tests("concurrency", [test_second_session_waits_then_merges, test_simultaneous_near_duplicates_insert_once,
                              test_simultaneous_identical_notes_insert_once])


if __name__ == "__main__":
    main()

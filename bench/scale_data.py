"""Scale datasets for `make scale` (bench/scale.py): real embeddings, a perturbation generator for the rest, and
loading through the restore path.

Source of the vectors: the 100,000 really-embedded notes of the pinned benchmark database feedback_bench_100k
(bench/data.py: the 203 sample notes as variants over 100 task types, each embedded by pg_feedback's insert
trigger with bge-small-en-v1.5). They are read once, read-only, from the demo cluster (127.0.0.1:5433, or
FB_SCALE_SOURCE_PORT) and cached in .run/scale/real_notes.npz; when no such cluster exists, data.py builds the same
database in the scale cluster itself (the model embeds the 100,000 notes: about 8 minutes on 2 cores).

Layout at n notes: "scale_10pct" holds 10% of them, "scale_1pct" 1%, "scale_0_1pct" 0.1% (notes drawn from all
100 real task types, so every golden question applies to them), the rest is spread evenly over the 100 real task
types ("perf_review_t03", ...), each drawing from its own real notes. Each note gets a unique lesson: the source's
lesson with its "(case i)" replaced by the note's own number, so content hashes are unique.

Vectors: where no real note is used twice (10k, 100k) they are the real vectors unchanged. Where sources repeat
(1M: each real note about 10 times) every vector is v' = normalize(v + sigma_i * g), g ~ N(0, I/384), with a
per-note noise scale sigma_i = sigma * exp(tau * z_i), z_i ~ N(0, 1): sigma and tau chosen so that the
nearest-neighbour cosine quantiles (p5, p25, p50, p75, p95) of the synthetic notes (among all n) come closest to
those of the real notes (among the real 100,000); both distributions are reported.

Loading: the restore path, as pg_restore does it: the HNSW and GIN indexes are dropped, rows are COPYed (binary)
by a superuser with pg_feedback.restore_mode = on carrying embedding and embedding_model (the insert trigger
computes id and content_hash and keeps the vector: no model run), then the indexes are created again with the
extension's own definitions (timed), then VACUUM ANALYZE.
"""

import json
import re
import struct
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from common import ROOT, connect

CACHE = ROOT / ".run" / "scale" / "real_notes.npz"
LAYOUT_VERSION = 5          # bump when the generator or the layout changes: datasets are rebuilt
SEED = 20261201
SELECTIVE = (("scale_10pct", 0.10), ("scale_1pct", 0.01), ("scale_0_1pct", 0.001))
SOURCE_DB = "feedback_bench_100k"
COLUMNS = ("task_type", "wrong_answer", "correction", "lesson", "embedding", "embedding_model", "source", "tenant")
# Tenants: half the notes are shared (tenant NULL), the other half spread evenly over TENANTS tenant roles. The
# measurements' tenant role (TENANT_LOGIN) belongs to one of them and to feedback_reviewer (to call the candidate
# search directly), so it sees the shared notes and its tenant's: about half of every task type.
TENANTS = 100
SHARED_SHARE = 0.5
TENANT_LOGIN = "scale_tenant_reader"
MEASURED_TENANT = "scale_t07"


@dataclass
class Real:
    types: np.ndarray        # task_type per real note
    wrong: list
    corr: list
    lesson: list
    V: np.ndarray            # float32 (n, 384), L2-normalised
    key: str                 # embedding model key the vectors were made by


def label(n):
    return f"{n // 1_000_000}m" if n >= 1_000_000 and n % 1_000_000 == 0 else f"{n // 1000}k"


def dbname(n):
    return f"feedback_scale_{label(n)}"


# ---------------------------------------------------------------------------------------------------------------
# Real notes
# ---------------------------------------------------------------------------------------------------------------

def _parse_binary_copy(buf, want_vector_at):
    """Rows of a binary COPY (text fields decoded, the field at want_vector_at as float32 array)."""
    mv = memoryview(buf)
    pos = 19  # signature (11) + flags (4) + header extension length (4)
    rows = []
    while True:
        (nf,) = struct.unpack_from(">h", mv, pos)
        pos += 2
        if nf == -1:
            break
        row = []
        for i in range(nf):
            (ln,) = struct.unpack_from(">i", mv, pos)
            pos += 4
            if ln == -1:
                row.append(None)
                continue
            if i == want_vector_at:
                dim, _ = struct.unpack_from(">hh", mv, pos)
                row.append(np.frombuffer(mv[pos + 4:pos + ln], dtype=">f4").astype(np.float32))
            else:
                row.append(bytes(mv[pos:pos + ln]).decode())
            pos += ln
        rows.append(row)
    return rows


def _read_source(port, log):
    with connect(port, SOURCE_DB) as c:
        c.execute("SET default_transaction_read_only = on")
        n, types, key = c.execute(
            "SELECT count(*), count(DISTINCT task_type), min(embedding_model) FROM feedback_notes "
            "WHERE embedding IS NOT NULL AND status = 'active'").fetchone()
        if n != 100_000 or types != 100:
            raise RuntimeError(f"{SOURCE_DB} on port {port} holds {n} notes over {types} task types, not 100,000 / 100")
        buf = bytearray()
        with c.cursor().copy("COPY (SELECT task_type, wrong_answer, correction, lesson, embedding FROM feedback_notes "
                             "WHERE embedding IS NOT NULL AND status = 'active' ORDER BY id) TO STDOUT (FORMAT binary)") as cp:
            for block in cp:
                buf += block
    rows = _parse_binary_copy(buf, 4)
    log(f"  read {len(rows)} real notes from {SOURCE_DB} on port {port} (read-only)")
    return Real(np.array([r[0] for r in rows]), [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows],
                np.stack([r[4] for r in rows]), key)


def real_notes(source_port, own_port, log=print):
    """The 100,000 real notes and their vectors: cached, else read from source_port, else built in own_port."""
    if CACHE.exists():
        z = np.load(CACHE, allow_pickle=False)
        meta = json.loads(str(z["meta"]))
        log(f"  real notes: {CACHE.relative_to(ROOT)} (read from {meta['from']})")
        return Real(z["types"], list(z["wrong"]), list(z["corr"]), list(z["lesson"]), z["V"], meta["key"])
    try:
        real = _read_source(source_port, log)
        origin = f"127.0.0.1:{source_port}/{SOURCE_DB}"
    except Exception as e:  # no demo cluster, or not the pinned data: build the same database here
        log(f"  no usable {SOURCE_DB} on port {source_port} ({str(e).splitlines()[0]}); building it in the scale "
            f"cluster with bench/data.py (the model embeds 100,000 notes: ~8 minutes)")
        import data
        data.ensure(own_port, log=log)
        real = _read_source(own_port, log)
        origin = f"127.0.0.1:{own_port}/{SOURCE_DB} (built by bench/data.py)"
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    np.savez(CACHE, types=real.types, wrong=np.array(real.wrong), corr=np.array(real.corr),
             lesson=np.array(real.lesson), V=real.V, meta=json.dumps({"key": real.key, "from": origin}))
    return real


# ---------------------------------------------------------------------------------------------------------------
# Layout and generator
# ---------------------------------------------------------------------------------------------------------------

def layout(n, real):
    """(task_type per note, source index per note), deterministic. Selective types first, then the 100 real
    types; within a real type the sources are its own notes in a fixed random order, cycled if need be."""
    rng = np.random.default_rng(SEED + n)
    real_types = sorted(set(real.types.tolist()))
    by_type = {t: rng.permutation(np.flatnonzero(real.types == t)) for t in real_types}
    sel_sizes = [(name, int(round(n * share))) for name, share in SELECTIVE]
    rest = n - sum(s for _, s in sel_sizes)
    per_type = [rest // len(real_types) + (1 if i < rest % len(real_types) else 0) for i in range(len(real_types))]
    types, sources = [], []
    leftovers = []
    for t, k in zip(real_types, per_type):
        order = by_type[t]
        idx = np.resize(order, k)          # cycles when k > notes of the type
        types += [t] * k
        sources.append(idx)
        if k < len(order):
            leftovers.append(order[k:])
    # Selective types draw from the real notes the other types left unused, then from all notes.
    pool = np.concatenate(leftovers) if leftovers else np.empty(0, dtype=np.int64)
    pool = rng.permutation(pool)
    need = sum(s for _, s in sel_sizes)
    if len(pool) < need:
        pool = np.concatenate([pool, np.resize(rng.permutation(len(real.types)), need - len(pool))])
    start = 0
    sel_types, sel_src = [], []
    for name, k in sel_sizes:
        sel_types += [name] * k
        sel_src.append(pool[start:start + k])
        start += k
    return np.array(sel_types + types), np.concatenate(sel_src + sources).astype(np.int64)


def _normalize(X):
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X


def nn_cosines(sample, X, block=131072):
    """Nearest-neighbour cosine of each row index in sample among all rows of X (itself excluded)."""
    Q = X[sample]
    best = np.full(len(sample), -2.0, dtype=np.float32)
    for s in range(0, len(X), block):
        S = Q @ X[s:s + block].T
        hit = (sample >= s) & (sample < s + block)
        S[np.flatnonzero(hit), sample[hit] - s] = -2.0
        best = np.maximum(best, S.max(axis=1))
    return best


QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def real_nn(real, samples=2000):
    rng = np.random.default_rng(SEED)
    sample = rng.choice(len(real.V), samples, replace=False)
    return nn_cosines(sample, real.V)


def _restricted_nn(calib, src, real, sigmas, base, G, neighbours=50):
    """Nearest-neighbour cosine of the calib notes among the copies of their source's `neighbours` nearest real notes
    (where a synthetic note's nearest neighbour lies: a sibling copy or a copy of a near real note), for per-note
    noise scales sigmas. Cheap enough to search (sigma, tau) with; verified on all notes afterwards."""
    copies = {}
    for j, s_ in enumerate(src.tolist()):
        copies.setdefault(s_, []).append(j)
    near = np.argsort(-(real.V[src[calib]] @ real.V.T), axis=1)[:, :neighbours]
    cand = [np.array([j for s_ in row.tolist() for j in copies.get(s_, ()) if j != i]) for i, row in zip(calib, near)]

    def nn(sig):
        out = np.empty(len(calib), dtype=np.float32)
        for k, (i, js) in enumerate(zip(calib, cand)):
            xi = base[i] + sig[i] * G[i]
            xi /= np.linalg.norm(xi)
            xj = base[js] + sig[js, None] * G[js]
            xj /= np.linalg.norm(xj, axis=1, keepdims=True)
            out[k] = (xj @ xi).max()
        return out
    return nn


def vectors(n, real, src, log=print, samples=1000):
    """Vectors for the notes (sources src) and a report: the noise parameters and nearest-neighbour cosine
    quantiles, real vs synthetic. Where sources repeat, v' = normalize(v + sigma_i * g), g ~ N(0, I/384), with a
    per-note scale sigma_i = sigma * exp(tau * z_i), z_i ~ N(0, 1): tau spreads the nearest-neighbour cosines as the
    real ones spread, sigma sets their median (both searched on a sample, then checked against all notes)."""
    rng = np.random.default_rng(SEED + 7 * n)
    target_nn = real_nn(real)
    target_q = np.quantile(target_nn, QUANTILES)
    sample = rng.choice(n, min(samples, n), replace=False)
    base = real.V[src]
    sigma = tau = 0.0
    if np.bincount(src).max() <= 1:
        X = base.copy()
    else:
        G = rng.standard_normal(base.shape, dtype=np.float32) / np.float32(np.sqrt(base.shape[1]))
        z = rng.standard_normal(n).astype(np.float32)
        nn = _restricted_nn(sample[:400], src, real, None, base, G)
        best = None
        for tau_ in (0.0, 0.2, 0.3, 0.35, 0.4, 0.5):
            lo, hi = 0.0, 0.4
            for _ in range(14):
                mid = (lo + hi) / 2
                q = np.quantile(nn(mid * np.exp(tau_ * z)), QUANTILES)
                lo, hi = (mid, hi) if q[2] > target_q[2] else (lo, mid)
            sig_ = (lo + hi) / 2
            q = np.quantile(nn(sig_ * np.exp(tau_ * z)), QUANTILES)
            err = float(np.sum((q - target_q) ** 2))
            log(f"    tau {tau_:.2f}, sigma {sig_:.4f}: nearest-neighbour cosine p5/p25/p50/p75/p95 "
                f"{'/'.join(f'{x:.4f}' for x in q)} (real {'/'.join(f'{x:.4f}' for x in target_q)})")
            if best is None or err < best[0]:
                best = (err, sig_, tau_)
        _, sigma, tau = best
        X = base + (np.float32(sigma) * np.exp(np.float32(tau) * z))[:, None] * G
        _normalize(X)
        del G
    syn_nn = nn_cosines(sample, X)
    report = {"sigma": sigma, "tau": tau,
              "self_cosine_mean": float(np.mean(np.sum(X[sample] * base[sample], axis=1))),
              "nn_real": [float(x) for x in target_q],
              "nn_synthetic": [float(x) for x in np.quantile(syn_nn, QUANTILES)],
              "max_reuse": int(np.bincount(src).max())}
    return X.astype(np.float32), report


CASE = re.compile(r"\(case \d+\)\s*$")


def lessons(real, src):
    """Each note's lesson: its source's, numbered uniquely (the source's "(case i)" becomes the note's number)."""
    out = []
    for i, s in enumerate(src.tolist()):
        lesson = real.lesson[s]
        tag = f"(case {i + 1})"
        out.append(CASE.sub(tag, lesson) if CASE.search(lesson) else f"{lesson} {tag}")
    return out


# ---------------------------------------------------------------------------------------------------------------
# Binary COPY
# ---------------------------------------------------------------------------------------------------------------

HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)


def _field(b):
    return struct.pack(">i", len(b)) + b


def tenant_name(i):
    return f"scale_t{i:02d}"


def tenants(n):
    """The tenant of each of n notes (None: shared), deterministic."""
    rng = np.random.default_rng(SEED + 7 * n)
    shared = rng.random(n) < SHARED_SHARE
    which = rng.integers(0, TENANTS, n)
    return [None if s else tenant_name(int(t)) for s, t in zip(shared.tolist(), which.tolist())]


def ensure_roles(port):
    """The tenant roles and the measurements' login role (cluster-wide, kept between runs)."""
    with connect(port, "postgres") as c:
        for name in [tenant_name(i) for i in range(TENANTS)] + [TENANT_LOGIN]:
            if not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone():
                c.execute(f'CREATE ROLE "{name}" {"LOGIN" if name == TENANT_LOGIN else "NOLOGIN"}')
        c.execute(f'GRANT "{MEASURED_TENANT}" TO "{TENANT_LOGIN}"')


def copy_rows(types, wrong, corr, lesson, X, key, source="scale", tenant=None):
    """Binary COPY data for COLUMNS, one bytes object per row (vectors in pgvector's binary format); tenant: one
    per row (None: shared) or None for all shared."""
    dim = X.shape[1]
    vec_head = struct.pack(">hh", dim, 0)
    big = X.astype(">f4")
    key_f = _field(key.encode())
    src_f = _field(source.encode())
    null_f = struct.pack(">i", -1)
    nf = struct.pack(">h", len(COLUMNS))
    for i in range(len(types)):
        t = tenant[i] if tenant is not None else None
        yield b"".join((nf, _field(types[i].encode()), _field(wrong[i].encode()), _field(corr[i].encode()),
                        _field(lesson[i].encode()), _field(vec_head + big[i].tobytes()), key_f, src_f,
                        null_f if t is None else _field(t.encode())))


def copy_in(conn, rows_iter, chunk_bytes=1 << 20):
    """One COPY ... FROM STDIN (FORMAT binary) of the rows; the caller owns the transaction."""
    with conn.cursor().copy(f"COPY feedback_notes ({', '.join(COLUMNS)}) FROM STDIN (FORMAT binary)") as cp:
        cp.write(HEADER)
        buf, size = [], 0
        for r in rows_iter:
            buf.append(r)
            size += len(r)
            if size >= chunk_bytes:
                cp.write(b"".join(buf))
                buf, size = [], 0
        buf.append(struct.pack(">h", -1))
        cp.write(b"".join(buf))


def loadavg():
    return tuple(float(x) for x in Path("/proc/loadavg").read_text().split()[:3])


# ---------------------------------------------------------------------------------------------------------------
# Building a scale database
# ---------------------------------------------------------------------------------------------------------------

def meta(port, db, key="build"):
    """A value recorded in the dataset's scale_meta table ('build': the build and its timings; None when missing)."""
    try:
        with connect(port, db) as c:
            row = c.execute("SELECT value FROM scale_meta WHERE key = %s", (key,)).fetchone()
            return row[0] if row else None
    except Exception:
        return None


def put_meta(port, db, key, value):
    with connect(port, db) as c:
        c.execute("INSERT INTO scale_meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                  (key, json.dumps(value)))


def sizes(port, db, n):
    """Bytes of the table's parts and indexes, total and per note."""
    with connect(port, db) as c:
        rows = c.execute(
            "SELECT i.indexrelid::regclass::text, pg_relation_size(i.indexrelid) FROM pg_index i "
            "WHERE i.indrelid = 'feedback_notes'::regclass ORDER BY 2 DESC").fetchall()
        total, table, toast = c.execute(
            "SELECT pg_total_relation_size('feedback_notes'), pg_table_size('feedback_notes'), "
            "pg_total_relation_size(reltoastrelid) FROM pg_class WHERE oid = 'feedback_notes'::regclass").fetchone()
    out = {"heap": table - toast, "toast": toast}
    out.update({name: size for name, size in rows})
    out["total"] = total
    return {k: (v, v / n) for k, v in out.items()}


def build(port, n, real, log=print, copy_rows_per_statement=50_000):
    db = dbname(n)
    t_all = time.perf_counter()
    with connect(port, "postgres") as c:
        c.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        c.execute(f'CREATE DATABASE "{db}"')
    info = {"layout_version": LAYOUT_VERSION, "notes": n}
    with connect(port, db) as c:
        c.execute("SET client_min_messages = warning")
        c.execute("CREATE EXTENSION pg_feedback CASCADE")
        c.execute("CREATE TABLE scale_meta (key text PRIMARY KEY, value jsonb NOT NULL)")
        c.execute(f'GRANT feedback_reviewer TO "{TENANT_LOGIN}"')
        c.execute("SELECT * FROM _fb_lock_active_model()")   # pins the model in slot 1 (as a first note would)
        key = c.execute("SELECT fb_embedding_model()").fetchone()[0]
        if key != real.key:
            raise RuntimeError(f"the scale cluster's model is {key}, the real vectors are of {real.key}")
        stamp = ROOT / ".run" / "installed.stamp"
        info["build_stamp"] = stamp.read_text().strip()[:12] if stamp.exists() else "unknown"
        info["extension"] = c.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_feedback'").fetchone()[0]
        info["pgvector"] = c.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
        indexdefs = dict(c.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'feedback_notes' "
            "AND indexname IN ('feedback_notes_embedding_idx', 'feedback_notes_search_idx')").fetchall())
        info["indexdefs"] = indexdefs
        for name in indexdefs:
            c.execute(f"DROP INDEX {name}")
    log(f"  {db}: generating {n:,} notes")
    t0 = time.perf_counter()
    types, src = layout(n, real)
    X, vec_report = vectors(n, real, src, log=log)
    lesson = lessons(real, src)
    wrong = [real.wrong[s] for s in src.tolist()]
    corr = [real.corr[s] for s in src.tolist()]
    tenant = tenants(n)
    info["tenants"] = {"tenants": TENANTS, "shared_share": SHARED_SHARE,
                       "shared": sum(1 for t in tenant if t is None), "measured_tenant": MEASURED_TENANT}
    info["generate_s"] = time.perf_counter() - t0
    info["vectors"] = vec_report
    info["type_sizes"] = {name: int((types == name).sum()) for name, _ in SELECTIVE}
    info["other_types"] = len(set(types.tolist())) - len(SELECTIVE)
    log(f"  {db}: sigma {vec_report['sigma']:.4f}; nearest-neighbour cosine quantiles real "
        f"{[round(x, 4) for x in vec_report['nn_real']]}, synthetic {[round(x, 4) for x in vec_report['nn_synthetic']]}")
    # COPY through the restore path, in statements of copy_rows_per_statement rows.
    load_before = loadavg()
    t0 = time.perf_counter()
    with connect(port, db) as c:
        c.execute("SET pg_feedback.restore_mode = on")
        for s in range(0, n, copy_rows_per_statement):
            e = min(n, s + copy_rows_per_statement)
            copy_in(c, copy_rows(types[s:e], wrong[s:e], corr[s:e], lesson[s:e], X[s:e], real.key,
                                 tenant=tenant[s:e]))
            if (e // copy_rows_per_statement) % 5 == 0 or e == n:
                log(f"  {db}: {e:,}/{n:,} rows copied ({e / (time.perf_counter() - t0):,.0f} rows/s)")
    copy_s = time.perf_counter() - t0
    info["copy"] = {"seconds": copy_s, "rows_per_s": n / copy_s, "rows_per_statement": copy_rows_per_statement,
                    "load_before": load_before, "load_after": loadavg(),
                    "indexes_present": "primary key, content_hash unique, (task_type, status), pending, empty "
                                       "embedding_alt HNSW; not the embedding HNSW nor the GIN"}
    del X
    with connect(port, db) as c:
        settings = dict(c.execute(
            "SELECT name, current_setting(name) FROM pg_settings WHERE name IN ('maintenance_work_mem', "
            "'max_parallel_maintenance_workers', 'shared_buffers', 'max_parallel_workers', 'work_mem')").fetchall())
        info["build_settings"] = settings
        notices = []
        c.add_notice_handler(lambda d: notices.append(d.message_primary))
        for name, what in (("feedback_notes_search_idx", "gin"), ("feedback_notes_embedding_idx", "hnsw")):
            load_before = loadavg()
            notices.clear()
            t0 = time.perf_counter()
            c.execute(indexdefs[name])
            info[f"{what}_build"] = {"seconds": time.perf_counter() - t0, "load_before": load_before,
                                     "load_after": loadavg(), "notices": list(notices)}
            log(f"  {db}: CREATE INDEX {name} ({what}) in {info[f'{what}_build']['seconds']:.1f} s")
        t0 = time.perf_counter()
        c.execute("VACUUM ANALYZE feedback_notes")
        info["vacuum_analyze_s"] = time.perf_counter() - t0
        got = c.execute("SELECT count(*), count(DISTINCT content_hash), count(*) FILTER (WHERE embedding_model = %s) "
                        "FROM feedback_notes", (real.key,)).fetchone()
        if got != (n, n, n):
            raise RuntimeError(f"{db}: loaded {got} (rows, distinct hashes, vectors of the model), expected {n}")
    info["sizes_built"] = sizes(port, db, n)
    with connect(port, db) as c:
        info["built_at"] = time.strftime("%Y-%m-%d %H:%M:%S")
        info["build_total_s"] = time.perf_counter() - t_all
        c.execute("INSERT INTO scale_meta VALUES ('build', %s)", (json.dumps(info),))
    return info


def ensure(port, n, real, log=print):
    """The scale database of n notes: reused when complete and of this layout, else built. Returns its build info."""
    ensure_roles(port)
    info = meta(port, dbname(n))
    if info and info.get("layout_version") == LAYOUT_VERSION and info.get("notes") == n:
        with connect(port, dbname(n)) as c:   # a newer released version installed since: the users' path
            installed, default = c.execute("SELECT installed_version, default_version FROM pg_available_extensions "
                                           "WHERE name = 'pg_feedback'").fetchone()
            if installed != default:
                log(f"  {dbname(n)}: ALTER EXTENSION pg_feedback UPDATE ({installed} -> {default})")
                c.execute("ALTER EXTENSION pg_feedback UPDATE")
        log(f"  {dbname(n)}: reusing the dataset built {info['built_at']}")
        return info
    return build(port, n, real, log=log)

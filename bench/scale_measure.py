"""Measurements of `make scale` on one scale database (bench/scale.py runs them at every size).

Every timing records the machine's load averages (/proc/loadavg) before and after: this is a shared 2-core VM.
Measurements that write (ingest, restore COPY, index variants) run in transactions that are rolled back, so a
dataset stays as built and a second run measures the same data.
"""

import csv
import random
import statistics
import threading
import time

import numpy as np

import retrieval
import scale_data as sd
from common import ROOT, connect, percentile

K = 20
EF_SWEEP = (40, 100, 200, 400, 800)
TYPICAL = "typical"   # one of the 100 real task types, each question aimed at a team type of its subject
HNSW_INDEX = "feedback_notes_embedding_idx"

# The ANN branch of _fb_candidates (sql/search.sql), spelled out so that ef_search and the index can vary: "IS TRUE"
# keeps the planner on the HNSW index, as the extension does. Tenant filter: every note is shared (tenant NULL).
ANN_SQL = ("SELECT c.id, c.lesson FROM (SELECT f.id, f.lesson, f.embedding <=> %(q)s::vector AS distance "
           "FROM feedback_notes f "
           "WHERE (f.task_type = %(t)s) IS TRUE AND f.status = 'active' AND f.embedding_model = %(key)s "
           "AND f.embedding IS NOT NULL AND f.tenant IS NULL ORDER BY f.embedding <=> %(q)s::vector LIMIT %(k)s) c "
           "ORDER BY c.distance, c.id")
# What a per-task_type partial index needs: a plain equality the planner can match to the index predicate.
PLAIN_SQL = ANN_SQL.replace("(f.task_type = %(t)s) IS TRUE", "f.task_type = %(t)s")


def loadavg():
    return sd.loadavg()


def _sample_lessons():
    with open(ROOT / "data" / "sample_notes.csv", newline="") as f:
        return sorted({r["lesson"] for r in csv.DictReader(f)}, key=len, reverse=True)


BASES = _sample_lessons()


def base_lesson(lesson):
    """The sample lesson a note's lesson is a variant of (prefix + lesson + suffix + case number), else itself."""
    return next((b for b in BASES if b in lesson), lesson)


def _lesson_recall(got_lessons, exact_lessons):
    want = {base_lesson(x) for x in exact_lessons}
    return len({base_lesson(x) for x in got_lessons} & want) / len(want) if want else 1.0


def questions(n=40, warm=10, seed=11):
    """The n golden questions of `make bench` (bench/retrieval.py: paraphrases of a note, each aimed at a team's
    task type of its subject) and warm questions other answer questions, never measured."""
    picked = retrieval.questions(n, seed)
    with open(ROOT / "data" / "golden_questions.csv", newline="") as f:
        rest = [r["question"] for r in csv.DictReader(f) if r["kind"] == "answer"]
    used = {q for q, _ in picked}
    rest = [q for q in rest if q not in used]
    random.Random(seed + 1).shuffle(rest)
    return picked, rest[:warm]


def targets(info, picked):
    """(label, task_type or None for per-question team types, size) of the measured task types."""
    n = info["notes"]
    out = [(name, name, info["type_sizes"][name]) for name, _ in sd.SELECTIVE]
    other = (n - sum(info["type_sizes"].values())) // info["other_types"]
    out.append((TYPICAL, None, other))
    return out


def pairs_for(picked, task_type):
    return [(q, task_type if task_type else t) for q, t in picked]


# ---------------------------------------------------------------------------------------------------------------

def sizes(port, db, n):
    return sd.sizes(port, db, n)


def prewarm(port, db):
    """Loads table, TOAST and indexes into shared buffers (pg_prewarm): measurements then see a server whose RAM holds
    the working set, whatever ran before. Returns seconds and pages."""
    with connect(port, db) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        t0 = time.perf_counter()
        pages = c.execute(
            "SELECT sum(pg_prewarm(oid)) FROM pg_class WHERE oid IN (SELECT 'feedback_notes'::regclass UNION ALL "
            "SELECT reltoastrelid FROM pg_class WHERE oid = 'feedback_notes'::regclass UNION ALL "
            "SELECT indexrelid FROM pg_index WHERE indrelid = 'feedback_notes'::regclass UNION ALL "
            "SELECT indexrelid FROM pg_index WHERE indrelid = (SELECT reltoastrelid FROM pg_class "
            "WHERE oid = 'feedback_notes'::regclass))").fetchone()[0]
        return time.perf_counter() - t0, int(pages)


def embed_questions(port, db, texts):
    with connect(port, db) as c:
        return {q: c.execute("SELECT fb_embed_query(%s)::text", (q,)).fetchone()[0] for q in texts}


# ---------------------------------------------------------------------------------------------------------------
# fb_retrieve latency
# ---------------------------------------------------------------------------------------------------------------

def retrieve_latency(port, db, pairs, warm, rerank, settings=None, user="postgres"):
    """p50/p95 ms of fb_retrieve over pairs in a new connection after warm questions; rows and cross-encoder pairs
    per query. rerank None: the defaults (selective reranking); False: cosine only. settings: SET first. user: the
    role retrieving (a tenant's role sees the shared notes and its tenant's)."""
    arg = "" if rerank is None else ", rerank => false"
    with connect(port, db, user=user) as c:
        for name, value in (settings or {}).items():
            c.execute(f"SET {name} = '{value}'")
        c.execute("SELECT fb_embed_query('warm-up'), fb_rerank('warm', ARRAY['up'])")
        for q in warm:
            c.execute(f"SELECT id FROM fb_retrieve(%s, %s{arg})", (q, pairs[0][1])).fetchall()
        before = c.execute("SELECT pairs_scored FROM fb_model_stats()").fetchone()[0]
        load = loadavg()
        lat, rows, got = [], 0, []
        for q, t in pairs:
            t0 = time.perf_counter()
            res = c.execute(f"SELECT id, lesson FROM fb_retrieve(%s, %s{arg})", (q, t)).fetchall()
            lat.append((time.perf_counter() - t0) * 1000)
            rows += len(res)
            got.append(([r[0] for r in res], sorted({base_lesson(r[1]) for r in res})))
        pairs_scored = c.execute("SELECT pairs_scored FROM fb_model_stats()").fetchone()[0] - before
    return {"p50": statistics.median(lat), "p95": percentile(lat, 95), "rows": rows / len(pairs),
            "pairs": pairs_scored / len(pairs), "load": load, "results": got}


def agreement(a, b):
    """Share of queries where two fb_retrieve runs returned the same notes, and the same lessons (variants of one
    sample lesson count as the same lesson)."""
    same_ids = statistics.mean(1.0 if x[0] == y[0] else 0.0 for x, y in zip(a["results"], b["results"]))
    same_lessons = statistics.mean(1.0 if x[1] == y[1] else 0.0 for x, y in zip(a["results"], b["results"]))
    return same_ids, same_lessons


# ---------------------------------------------------------------------------------------------------------------
# Candidate stage: recall against exact search, per path
# ---------------------------------------------------------------------------------------------------------------

def _timed_rows(c, sql, params):
    t0 = time.perf_counter()
    rows = c.execute(sql, params).fetchall()
    return rows, (time.perf_counter() - t0) * 1000


def _recall(got, exact):
    return len(set(got) & set(exact)) / len(exact) if exact else 1.0


def _score(rows, exact):
    """recall@k of ids, whether the nearest note is found, lesson recall; rows and exact are (id, lesson)."""
    ids = [r[0] for r in rows]
    ex = [r[0] for r in exact]
    return {"recall": _recall(ids, ex), "top1": 1.0 if exact and ids and exact[0][0] in ids[:1] else 0.0,
            "lesson_recall": _lesson_recall([r[1] for r in rows], [r[1] for r in exact]), "returned": len(ids)}


def _summary(scores, ms):
    out = {k: statistics.mean(s[k] for s in scores) for k in scores[0]}
    out.update({"p50": statistics.median(ms), "p95": percentile(ms, 95)})
    return out


def candidate_stage(port, db, pairs, vecs, key, user="postgres"):
    """Per path (exact, HNSW iterative scan as shipped, auto = what fb_retrieve takes): candidates returned,
    recall@20 against exact, nearest note found, lesson recall, p50/p95 ms; the full-text stage's p50/p95; the
    best cosine (exact top 1). Returns also the exact (id, lesson) lists."""
    scores = {m: [] for m in ("exact", "ann", "auto")}
    ms = {m: [] for m in scores}
    lexical_ms, best, exact_rows = [], [], []
    sql = "SELECT id, lesson, distance FROM _fb_candidates(%s::vector, %s, %s, '{}')"
    with connect(port, db, user=user) as c:
        for q, t in pairs:   # warm
            c.execute(sql.format("auto"), (vecs[q], t, K)).fetchall()
        load = loadavg()
        for q, t in pairs:
            rows, m = _timed_rows(c, sql.format("exact"), (vecs[q], t, K))
            exact = [(r[0], r[1]) for r in rows]
            best.append(1 - rows[0][2])
            exact_rows.append(exact)
            scores["exact"].append(_score(exact, exact))
            ms["exact"].append(m)
            for mode in ("ann", "auto"):
                rows, m = _timed_rows(c, sql.format(mode), (vecs[q], t, K))
                scores[mode].append(_score([(r[0], r[1]) for r in rows], exact))
                ms[mode].append(m)
            t0 = time.perf_counter()
            c.execute("SELECT count(*) FROM _fb_lexical_candidates(%s::vector, _fb_lexical_terms(%s, %s, "
                      "current_setting('pg_feedback.lexical_rank_limit')::integer), %s, 20)",
                      (vecs[q], q, t, t)).fetchone()
            lexical_ms.append((time.perf_counter() - t0) * 1000)
    res = {m: _summary(scores[m], ms[m]) for m in scores}
    res["lexical_p50"] = statistics.median(lexical_ms)
    res["lexical_p95"] = percentile(lexical_ms, 95)
    res["best_cosine"] = statistics.mean(best)
    res["load"] = load
    return res, exact_rows


def ann_sweep(c, pairs, vecs, key, exact_rows, efs=EF_SWEEP, iterative="relaxed_order", sql=ANN_SQL):
    """Recall, nearest found, lesson recall, returned, p50 of the ANN query for each ef_search (session settings;
    same connection)."""
    res = {}
    c.execute(f"SET hnsw.iterative_scan = {iterative}")
    for ef in efs:
        c.execute(f"SET hnsw.ef_search = {ef}")
        for q, t in pairs[:5]:   # warm
            c.execute(sql, {"q": vecs[q], "t": t, "key": key, "k": K}).fetchall()
        scores, ms = [], []
        for (q, t), exact in zip(pairs, exact_rows):
            rows, m = _timed_rows(c, sql, {"q": vecs[q], "t": t, "key": key, "k": K})
            scores.append(_score(rows, exact))
            ms.append(m)
        res[ef] = _summary(scores, ms)
    c.execute("RESET hnsw.iterative_scan")
    c.execute("RESET hnsw.ef_search")
    return res


def plan_of(c, sql, params):
    """The scan node of a query's plan, e.g. "Index Scan using feedback_notes_embedding_idx"."""
    for line in (r[0] for r in c.execute("EXPLAIN (COSTS OFF) " + sql, params)):
        line = line.strip().replace("->  ", "")
        if " using " in line or line.startswith("Seq Scan"):
            return line.split(" on ")[0]
    return "?"


def ef_sweep(port, db, pairs, vecs, key, exact_ids):
    with connect(port, db) as c:
        q, t = pairs[0]
        plan = plan_of(c, ANN_SQL, {"q": vecs[q], "t": t, "key": key, "k": K})
        load = loadavg()
        res = ann_sweep(c, pairs, vecs, key, exact_ids)
        res["plain ef 40"] = ann_sweep(c, pairs, vecs, key, exact_ids, efs=(40,), iterative="off")[40]
    res["plan"] = plan
    res["load"] = load
    return res


# ---------------------------------------------------------------------------------------------------------------
# Index variants (rolled back)
# ---------------------------------------------------------------------------------------------------------------

def _index_size(c, name):
    return c.execute("SELECT pg_relation_size(%s::regclass)", (name,)).fetchone()[0]


def _build_index(c, name, clause):
    """Builds the HNSW index `name` on feedback_notes' embeddings with `clause` (WITH or WHERE): build time, size,
    and the load averages before and after."""
    load_before = loadavg()
    t0 = time.perf_counter()
    c.execute(f"CREATE INDEX {name} ON feedback_notes USING hnsw (embedding vector_cosine_ops) {clause}")
    build_s = time.perf_counter() - t0
    return {"build_s": build_s, "size": _index_size(c, name), "load_before": load_before, "load_after": loadavg()}


def partial_index(port, db, task_type, pairs, vecs, key, exact_rows, efs=(40, 100, 200, 400)):
    """A per-task_type partial HNSW index (the extension's definition plus WHERE task_type = ...), in a transaction
    that is rolled back: build time, size, and recall/latency through the shipped ANN query ("IS TRUE": the planner
    cannot match the index predicate, so it keeps the global index) and through a plain equality, which uses the
    partial index (what the extension would have to issue), for plain HNSW scans at several ef_search."""
    with connect(port, db, autocommit=False) as c:
        res = _build_index(c, "scale_partial_idx", f"WHERE task_type = '{task_type}'")
        q, t = pairs[0]
        params = {"q": vecs[q], "t": t, "key": key, "k": K}
        res["plan_shipped"] = plan_of(c, ANN_SQL, params)
        res["plan_plain"] = plan_of(c, PLAIN_SQL, params)
        res["shipped"] = ann_sweep(c, pairs, vecs, key, exact_rows, efs=(400,))[400]
        res["plain"] = ann_sweep(c, pairs, vecs, key, exact_rows, efs=efs, iterative="off", sql=PLAIN_SQL)
        c.rollback()
    return res


def build_variants(port, db, variants, type_pairs, vecs, key, exact_by_type, log=print):
    """HNSW m / ef_construction variants replacing the extension's index inside a transaction that is rolled back:
    build time, size, recall and latency at ef_search 40 / 100 / 400 (iterative scan) for the given task types."""
    out = {}
    with connect(port, db, autocommit=False) as c:
        c.execute("SELECT set_config('maintenance_work_mem', current_setting('maintenance_work_mem'), false)")
        for m, efc in variants:
            c.execute(f"DROP INDEX {HNSW_INDEX}")
            res = _build_index(c, "scale_variant_idx", f"WITH (m = {m}, ef_construction = {efc})")
            for label_, pairs in type_pairs.items():
                res[label_] = ann_sweep(c, pairs, vecs, key, exact_by_type[label_], efs=(40, 100, 400))
            out[(m, efc)] = res
            log(f"    m {m}, ef_construction {efc}: built in {res['build_s']:.1f} s, "
                + ", ".join(f"{lbl} recall@ef400 {res[lbl][400]['recall']:.3f}" for lbl in type_pairs))
            c.rollback()
    return out


# ---------------------------------------------------------------------------------------------------------------
# Writes (rolled back)
# ---------------------------------------------------------------------------------------------------------------

def _new_notes(real, info, count, seed, case_base):
    """count new notes shaped like the dataset's: task types in proportion to their size, each lesson a real
    lesson renumbered beyond the dataset's (so a near-duplicate of stored variants, as new reports are)."""
    n = info["notes"]
    types, src = sd.layout(n, real)
    rng = np.random.default_rng(seed)
    pick = rng.choice(n, count, replace=False)
    out = []
    for j, i in enumerate(pick.tolist()):
        s = int(src[i])
        lesson = sd.CASE.sub(f"(case {case_base + j})", real.lesson[s])
        out.append((str(types[i]), real.wrong[s], real.corr[s], lesson, int(s)))
    return out


def ingest_write_path(port, db, real, info, count=500, dedup_default=True, tenant=sd.MEASURED_TENANT):
    """fb_ingest_batch of count new notes of one tenant in one call (the trigger embeds them in batched model runs,
    compares each with its near neighbours of that tenant and merges or holds them), rolled back. rows/s and what
    became of them."""
    notes = _new_notes(real, info, count, seed=99, case_base=9_000_000)
    with connect(port, db, autocommit=False) as c:
        if not dedup_default:
            c.execute("SET pg_feedback.dup_threshold = 1")
        threshold = c.execute("SHOW pg_feedback.dup_threshold").fetchone()[0]
        load = loadavg()
        t0 = time.perf_counter()
        actions = c.execute(
            "SELECT action, count(*) FROM fb_ingest_batch(ARRAY(SELECT ROW(t, w, c, l, 'scale')::fb_note_input "
            "FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[]) AS u(t, w, c, l)), tenant => %s) GROUP BY 1",
            ([x[0] for x in notes], [x[1] for x in notes], [x[2] for x in notes], [x[3] for x in notes],
             tenant)).fetchall()
        seconds = time.perf_counter() - t0
        c.rollback()
    return {"rows_per_s": count / seconds, "seconds": seconds, "actions": dict(actions), "dup_threshold": threshold,
            "tenant": tenant, "load": load, "load_after": loadavg()}


def restore_copy_indexed(port, db, real, info, count=5000):
    """COPY of count rows through the restore path into the full table with every index present, rolled back."""
    notes = _new_notes(real, info, count, seed=98, case_base=8_000_000)
    sigma = info["vectors"]["sigma"]
    rng = np.random.default_rng(97)
    X = real.V[[x[4] for x in notes]].copy()
    if sigma:
        X += np.float32(sigma) * rng.standard_normal(X.shape, dtype=np.float32) / np.float32(np.sqrt(X.shape[1]))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
    with connect(port, db, autocommit=False) as c:
        c.execute("SET pg_feedback.restore_mode = on")
        load = loadavg()
        t0 = time.perf_counter()
        sd.copy_in(c, sd.copy_rows([x[0] for x in notes], [x[1] for x in notes], [x[2] for x in notes],
                                   [x[3] for x in notes], X, real.key))
        seconds = time.perf_counter() - t0
        c.rollback()
    return {"rows_per_s": count / seconds, "seconds": seconds, "rows": count, "load": load, "load_after": loadavg()}


def merge_check(port, db, samples=20, seed=5):
    """The near-duplicate check an ingest runs per new note (_fb_candidates(vec, task_type, 2, 'auto', tenant,
    scoped => true), from _fb_merge_near_duplicates) against the same call unscoped (as retrieval filters): p50 ms
    over stored notes of the 100 real task types used as new vectors."""
    with connect(port, db) as c:
        c.execute("SELECT setseed(%s)", (seed / 100,))
        notes = c.execute("SELECT embedding::text, task_type FROM feedback_notes TABLESAMPLE BERNOULLI (1) REPEATABLE (5) "
                          "WHERE task_type NOT LIKE 'scale\\_%%' ORDER BY random() LIMIT %s", (samples,)).fetchall()
        out = {}
        for label, tenant, scoped in (("scoped", None, True), ("unscoped", None, False),
                                      ("scoped_tenant", sd.MEASURED_TENANT, True)):
            ms = []
            for v, t in notes:
                t0 = time.perf_counter()
                c.execute("SELECT count(*) FROM _fb_candidates(%s::vector, %s, 2, 'auto', %s, %s)",
                          (v, t, tenant, scoped))
                ms.append((time.perf_counter() - t0) * 1000)
            out[label] = {"p50": statistics.median(ms), "p95": percentile(ms, 95)}
        out["load"] = loadavg()
    return out


def maintain(port, db):
    """fb_maintain() at its defaults: the slice indexes the store needs (kept when a reused dataset has them), with
    each new one's build time and the recall fb_eval_ann measured right after; then feedback_index_status."""
    with connect(port, db) as c:
        c.execute("SELECT setseed(0.17)")
        load = loadavg()
        t0 = time.perf_counter()
        rows = c.execute("SELECT task_type, notes, action, index_name, build_ms, recall FROM fb_maintain()").fetchall()
        seconds = time.perf_counter() - t0
        status = c.execute("SELECT task_type, notes, search, index_bytes, build_ms, recall, recall_queries "
                           "FROM feedback_index_status").fetchall()
    return {"seconds": seconds, "load": load, "load_after": loadavg(),
            "actions": [dict(zip(("task_type", "notes", "action", "index_name", "build_ms", "recall"), r))
                        for r in rows],
            "status": {r[0]: dict(zip(("notes", "search", "index_bytes", "build_ms", "recall", "recall_queries"),
                                      r[1:])) for r in status}}


def vacuum(port, db):
    with connect(port, db) as c:
        t0 = time.perf_counter()
        c.execute("VACUUM feedback_notes")
        return time.perf_counter() - t0


def eval_ann(port, db, sample=200):
    """fb_eval_ann (random notes as queries, forced HNSW path vs exact), seeded."""
    with connect(port, db) as c:
        c.execute("SELECT setseed(0.42)")
        row = c.execute("SELECT queries, recall, ann_returned FROM fb_eval_ann(%s) WHERE task_type = '(all)'",
                        (sample,)).fetchone()
    return {"queries": row[0], "recall": row[1], "returned": row[2]}


# ---------------------------------------------------------------------------------------------------------------
# Throughput
# ---------------------------------------------------------------------------------------------------------------

def throughput(port, db, pairs, warm, clients, seconds=30):
    """Queries/s of fb_retrieve (defaults) with `clients` sessions looping over the (question, task_type) pairs for
    `seconds`, with the per-session query and score caches off (pg_feedback.query_cache_size and
    rerank_cache_size = 0), so a repeated question costs what a new one does."""
    lat, errors = [], [0]
    lock = threading.Lock()
    ready, go = threading.Barrier(clients + 1), threading.Barrier(clients + 1)
    window = {}

    def work(offset):
        with connect(port, db) as c:
            c.execute("SET pg_feedback.query_cache_size = 0")
            c.execute("SET pg_feedback.rerank_cache_size = 0")
            c.execute("SELECT fb_embed_query('warm-up'), fb_rerank('warm', ARRAY['up'])")
            for q in warm[:3]:
                c.execute("SELECT id FROM fb_retrieve(%s, %s)", (q, pairs[0][1])).fetchall()
            ready.wait()
            go.wait()
            i = offset
            while time.perf_counter() < window["end"]:
                q, t = pairs[i % len(pairs)]
                i += 1
                t0 = time.perf_counter()
                try:
                    c.execute("SELECT id FROM fb_retrieve(%s, %s)", (q, t)).fetchall()
                except Exception:
                    with lock:
                        errors[0] += 1
                    continue
                with lock:
                    lat.append((time.perf_counter() - t0) * 1000)

    threads = [threading.Thread(target=work, args=(k * len(pairs) // clients,)) for k in range(clients)]
    for th in threads:
        th.start()
    ready.wait()
    load = loadavg()
    t0 = time.perf_counter()
    window["end"] = t0 + seconds
    go.wait()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - t0
    return {"clients": clients, "qps": len(lat) / elapsed, "p50": statistics.median(lat) if lat else None,
            "p95": percentile(lat, 95) if lat else None, "done": len(lat), "errors": errors[0], "load": load,
            "load_after": loadavg()}

"""`make scale`: pg_feedback's scale curve at 10k, 100k and 1M notes.

    make scale                                     # all sizes; results/scale.md (+ results/scale.json)
    FB_SCALE_SIZES=10000,100000 make scale         # a subset of sizes
    .venv/bin/python bench/scale.py                # the same without the set-up step
    .venv/bin/python bench/scale.py --report       # results/scale.md again from results/scale.json

What it does:
- starts its own cluster (.run/scale-pgdata, 127.0.0.1:5446, pg_feedback preloaded: models run in the shared
  inference worker) with shared_buffers 6GB, maintenance_work_mem 4GB, max_parallel_maintenance_workers 1,
  max_wal_size 8GB, checkpoint_timeout 30min (ALTER SYSTEM; restarted once when they change), and stops it at
  the end (FB_SCALE_KEEP=1 leaves it running);
- builds one database per size (feedback_scale_10k, _100k, _1m) from real embeddings (bench/scale_data.py: the
  100,000 really-embedded notes of feedback_bench_100k, read-only from the demo cluster on 5433 and cached in
  .run/scale/real_notes.npz; perturbed copies where a size needs more notes than exist), with one task type
  holding 10% of the notes, one 1%, one 0.1%, the rest over the 100 real task types, loaded through the restore
  path (COPY, restore_mode) with the HNSW and GIN indexes created afterwards (timed);
- measures at each size, after pg_prewarm: table and index size per note; fb_retrieve p50/p95 with the defaults
  (selective rerank) and with rerank => false for the 10%, 1%, 0.1% task types and a typical one (40 golden
  questions each, after 10 warm-up questions, new connection per row); candidate recall@20 against exact search
  for the exact, HNSW (iterative scan) and automatic paths; fb_retrieve with hybrid off and with every task type
  searched exactly (and how often that changes the answer); an hnsw.ef_search sweep of the global index; HNSW
  m / ef_construction variants of the global index (at FB_SCALE_TUNE_AT, default 0: none; (16, 128) at 1M with
  FB_SCALE_TUNE_LARGEST=1); fb_maintain's slice indexes (build time, size, recall); the near-duplicate check an ingest runs per note; fb_eval_ann;
  ingest rows/s through fb_ingest_batch (500 new notes embedded by the trigger, near-duplicate merging at its
  default and off) and through the restore path (COPY of 5,000 rows into the indexed table); VACUUM after; at
  the largest size fb_retrieve throughput with 1, 2 and 4 sessions.

Datasets are reused when already built (a table scale_meta in each database records the build and its timings:
the HNSW build time and the sizes reported are the ones measured when the dataset was built), and so are the results
of the m / ef_construction variants (FB_SCALE_RETUNE=1 measures them again). From scratch `make scale` took about
35 minutes on this 2-core VM with a load average of ~3 from other jobs (1M: generating 1.5 min, COPY 3 min, HNSW
build 5 min; the variants 5 min at 100k and 5 min at 1M); a re-run that reuses everything takes about 16 minutes
(measurements only). Writes made by measurements are rolled back (VACUUM afterwards). Every timing carries the load
averages of the machine (shared VM). Environment: FB_SCALE_SIZES, FB_SCALE_PORT (5446), FB_SCALE_SOURCE_PORT
(5433), FB_SCALE_TUNE_AT (100000), FB_SCALE_TUNE_LARGEST (1: the (16, 128) variant at 1M too), FB_SCALE_RETUNE,
FB_SCALE_QUERIES (40), FB_SCALE_KEEP (leave the cluster running), FB_SCALE_SKIP_THROUGHPUT.
"""

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale_data as sd        # noqa: E402
import scale_measure as sm     # noqa: E402
from common import ROOT, connect   # noqa: E402

PORT = int(os.environ.get("FB_SCALE_PORT", "5446"))
SOURCE_PORT = int(os.environ.get("FB_SCALE_SOURCE_PORT", "5433"))
SIZES = [int(x) for x in os.environ.get("FB_SCALE_SIZES", "10000,100000,1000000").split(",") if x.strip()]
TUNE_AT = int(os.environ.get("FB_SCALE_TUNE_AT", "0"))   # 0: no m / ef_construction variants
QUERIES = int(os.environ.get("FB_SCALE_QUERIES", "40"))
DATADIR = ROOT / ".run" / "scale-pgdata"
SERVER_SETTINGS = {"shared_buffers": "6GB", "maintenance_work_mem": "4GB", "max_parallel_maintenance_workers": "1",
                   "max_wal_size": "8GB", "checkpoint_timeout": "30min"}
VARIANTS = ((8, 64), (16, 64), (16, 128), (32, 128))
VARIANTS_LARGEST = ((16, 128),)   # at 1M too (FB_SCALE_TUNE_LARGEST=0: skip, saves ~10 minutes)
ALL_EXACT = {"pg_feedback.exact_scan_limit": "1000000000"}   # every task type exact (2147483647, the maximum, overflows exact_limit + 1)
OUT_MD = ROOT / "results" / "scale.md"
OUT_JSON = ROOT / "results" / "scale.json"

T_START = time.perf_counter()


def log(msg):
    print(f"[{time.perf_counter() - T_START:7.1f}s] {msg}", flush=True)


def pg(cmd):
    subprocess.run(["bash", str(ROOT / "scripts" / "pg.sh"), cmd, str(DATADIR), str(PORT)], check=True)


def start_cluster():
    """Starts the scale cluster and applies SERVER_SETTINGS (a restart when shared_buffers changes)."""
    pg("start")
    with connect(PORT, "postgres") as c:
        for name, value in SERVER_SETTINGS.items():
            c.execute(f"ALTER SYSTEM SET {name} = '{value}'")
        c.execute("SELECT pg_reload_conf()")
        time.sleep(0.5)
        pending = c.execute("SELECT count(*) FROM pg_settings WHERE pending_restart").fetchone()[0]
    if pending:
        log("restarting the scale cluster for shared_buffers")
        pg("stop")
        pg("start")
    with connect(PORT, "postgres") as c:
        return {name: c.execute(f"SHOW {name}").fetchone()[0] for name in SERVER_SETTINGS}


def machine():
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
               if line.startswith("MemTotal"))
    return {"cpu": cpu, "cores": os.cpu_count(), "ram_gb": round(mem / 1024 / 1024, 1)}


# ---------------------------------------------------------------------------------------------------------------

def measure_size(n, real, picked, warm, vecs_cache, largest):
    db = sd.dbname(n)
    info = sd.ensure(PORT, n, real, log=log)
    r = {"info": info}
    with connect(PORT, db) as c:   # the version measured (info has the one that built the dataset)
        r["extension"] = c.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_feedback'").fetchone()[0]
    log(f"{db}: fb_maintain (slice indexes)")
    r["maintain"] = sm.maintain(PORT, db)
    built = [a for a in r["maintain"]["actions"] if a["action"] == "built"]
    log(f"{db}: fb_maintain in {r['maintain']['seconds']:.1f} s: {len(built)} built, "
        f"{sum(1 for a in r['maintain']['actions'] if a['action'] == 'kept')} kept")
    log(f"{db}: prewarming")
    r["prewarm_s"], r["prewarm_pages"] = sm.prewarm(PORT, db)
    r["sizes"] = sm.sizes(PORT, db, n)   # now (rolled-back writes of earlier runs leave index pages behind)
    with connect(PORT, db) as c:
        key = c.execute("SELECT fb_embedding_model()").fetchone()[0]
        r["settings"] = dict(c.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN ('pg_feedback.exact_scan_limit', "
            "'pg_feedback.rerank', 'pg_feedback.selective_rerank', 'pg_feedback.hybrid', 'pg_feedback.inference', "
            "'pg_feedback.dup_threshold', 'hnsw.ef_search', 'hnsw.iterative_scan', 'hnsw.max_scan_tuples')").fetchall())
    if not vecs_cache:
        vecs_cache.update(sm.embed_questions(PORT, db, [q for q, _ in picked]))
    r["types"] = {}
    exact_by_type, pairs_by_type = {}, {}
    for label, task_type, size in sm.targets(info, picked):
        pairs = sm.pairs_for(picked, task_type)
        pairs_by_type[label] = pairs
        t = {"size": size, "task_type": task_type or pairs[0][1]}
        log(f"{db}: {label} ({size:,} notes): fb_retrieve latency")
        t["retrieve_default"] = sm.retrieve_latency(PORT, db, pairs, warm, None)
        t["retrieve_cosine"] = sm.retrieve_latency(PORT, db, pairs, warm, False)
        t["retrieve_nohybrid"] = sm.retrieve_latency(PORT, db, pairs, warm, None, {"pg_feedback.hybrid": "off"})
        log(f"{db}: {label}: default p50 {t['retrieve_default']['p50']:.0f} ms, cosine p50 "
            f"{t['retrieve_cosine']['p50']:.0f} ms; candidate stage")
        t["candidates"], exact_by_type[label] = sm.candidate_stage(PORT, db, pairs, vecs_cache, key)
        log(f"{db}: {label}: as a tenant's role ({sd.MEASURED_TENANT}: shared notes and its own)")
        t["tenant"] = {
            "retrieve_default": sm.retrieve_latency(PORT, db, pairs, warm, None, user=sd.TENANT_LOGIN),
            "retrieve_cosine": sm.retrieve_latency(PORT, db, pairs, warm, False, user=sd.TENANT_LOGIN),
            "candidates": sm.candidate_stage(PORT, db, pairs, vecs_cache, key, user=sd.TENANT_LOGIN)[0]}
        if size >= 500:
            t["ef_sweep"] = sm.ef_sweep(PORT, db, pairs, vecs_cache, key, exact_by_type[label])
        if size > int(r["settings"]["pg_feedback.exact_scan_limit"]):
            log(f"{db}: {label}: fb_retrieve with every task type searched exactly")
            t["retrieve_exact"] = sm.retrieve_latency(PORT, db, pairs, warm, None, ALL_EXACT)
            t["retrieve_exact_cosine"] = sm.retrieve_latency(PORT, db, pairs, warm, False, ALL_EXACT)
            t["agreement"] = sm.agreement(t["retrieve_default"], t["retrieve_exact"])
            t["agreement_cosine"] = sm.agreement(t["retrieve_cosine"], t["retrieve_exact_cosine"])
        r["types"][label] = t
    variants = VARIANTS if n == TUNE_AT else VARIANTS_LARGEST if (
        n == max(SIZES) and n >= 1_000_000 and os.environ.get("FB_SCALE_TUNE_LARGEST", "0") != "0") else ()
    if variants:
        cached = sd.meta(PORT, db, "variants")
        if cached and not os.environ.get("FB_SCALE_RETUNE") and set(cached) >= {f"{m},{e}" for m, e in variants}:
            log(f"{db}: HNSW m / ef_construction variants: reusing the results of {cached['_at']} (FB_SCALE_RETUNE=1 "
                f"measures them again)")
            r["variants"] = {k: v for k, v in cached.items() if k != "_at"}   # JSON: ef keys are strings
            r["variants_measured_at"] = cached["_at"]
        else:
            log(f"{db}: HNSW m / ef_construction variants {variants} (each built and rolled back)")
            tp = {lbl: pairs_by_type[lbl] for lbl in ("scale_10pct", "scale_1pct", sm.TYPICAL)}
            r["variants"] = json.loads(json.dumps({f"{m},{efc}": v for (m, efc), v in sm.build_variants(
                PORT, db, variants, tp, vecs_cache, key, exact_by_type, log=log).items()}))
            r["variants_measured_at"] = time.strftime("%Y-%m-%d %H:%M:%S")
            sd.put_meta(PORT, db, "variants", {**r["variants"], "_at": r["variants_measured_at"]})
    r["merge_check"] = sm.merge_check(PORT, db)
    log(f"{db}: fb_eval_ann")
    r["eval_ann"] = sm.eval_ann(PORT, db)
    log(f"{db}: ingest through fb_ingest_batch and the restore path (rolled back)")
    r["ingest_default"] = sm.ingest_write_path(PORT, db, real, info)
    r["ingest_nodedup"] = sm.ingest_write_path(PORT, db, real, info, dedup_default=False)
    r["restore_indexed"] = sm.restore_copy_indexed(PORT, db, real, info)
    r["vacuum_s"] = sm.vacuum(PORT, db)
    if largest and not os.environ.get("FB_SCALE_SKIP_THROUGHPUT"):
        r["throughput"] = []
        for clients in (1, 2, 4):
            log(f"{db}: throughput, {clients} session(s), 30 s")
            r["throughput"].append(sm.throughput(PORT, db, pairs_by_type[sm.TYPICAL], warm, clients))
    return r


# ---------------------------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------------------------

def la(x):
    return "/".join(f"{v:.1f}" for v in x)


def mb(b):
    return f"{b / 1024 / 1024:,.0f} MB" if b < 1024 ** 3 else f"{b / 1024 ** 3:,.2f} GB"


def table(L, header):
    """A markdown table's header line, and the separator line under it."""
    L.append(header)
    L.append("|" + "---|" * (header.count(" | ") + 1))


def by_type(results, sizes):
    """(size, task type label, its measurements) of every task type measured, size by size."""
    return [(n, label, t) for n in sizes for label, t in results[n]["types"].items()]


def path_of(r, label, t):
    """How fb_retrieve searched a measured task type: its feedback_index_status row after fb_maintain."""
    st = (r.get("maintain") or {}).get("status", {})
    name = t.get("task_type")
    if name in st:
        return st[name]["search"]
    return "exact" if t["size"] <= int(r["settings"]["pg_feedback.exact_scan_limit"]) else "global index"


def summary_lines(results):
    """One line per size, as issue 22 asks: the lowest candidate recall@20 (auto path vs exact) over the measured
    task types, the highest default and cosine fb_retrieve p50, and ingest through the model with merging on."""
    out = []
    for n in sorted(results, key=int):
        r = results[n]
        rows = [t for t in r["types"].values()] + [t["tenant"] for t in r["types"].values() if "tenant" in t]
        out.append(f"scale {int(n)}: candidate_recall_min={min(t['candidates']['auto']['recall'] for t in rows):.3f} "
                   f"p50_default_max_ms={max(t['retrieve_default']['p50'] for t in rows):.1f} "
                   f"p50_cosine_max_ms={max(t['retrieve_cosine']['p50'] for t in rows):.1f} "
                   f"ingest_merge_rows_s={r['ingest_default']['rows_per_s']:.1f}")
    return out


def report(results, env):
    L = []
    sizes = sorted(results, key=int)
    lab = {n: sd.label(int(n)) for n in sizes}
    L.append("# pg_feedback scale curve (`make scale`)\n")
    L.append("```text\n" + "\n".join(summary_lines(results)) + "\n```\n")
    L.append(f"Run {env['started']} – {env['finished']} ({env['minutes']:.1f} min). Machine: {env['machine']['cpu']}, "
             f"{env['machine']['cores']} cores, {env['machine']['ram_gb']} GB RAM (shared VM: load averages "
             f"1/5/15 min recorded with each timing). Server: {json.dumps(env['server'])}; pg_feedback "
             f"{results[sizes[0]].get('extension', results[sizes[0]]['info']['extension'])}, pgvector {results[sizes[0]]['info']['pgvector']}, "
             f"models in the shared inference worker. {QUERIES} golden questions per row after 10 warm-up "
             f"questions; measurements after pg_prewarm of table, TOAST and indexes.\n")
    # Dataset and build
    L.append("## Datasets and build (restore path)\n")
    table(L, "| notes | 10% / 1% / 0.1% types | other types | sigma, tau | NN cosine real p5/p50/p95 | NN cosine "
             "synthetic p5/p50/p95 | COPY rows/s (no HNSW, no GIN) | GIN build | HNSW build | VACUUM ANALYZE | load "
             "during HNSW build (before → after) |")
    for n in sizes:
        i = results[n]["info"]
        v = i["vectors"]
        ts = i["type_sizes"]
        q = lambda xs: "/".join(f"{xs[k]:.4f}" for k in (0, 2, 4))
        L.append(f"| {int(n):,} | {ts['scale_10pct']:,} / {ts['scale_1pct']:,} / {ts['scale_0_1pct']:,} | "
                 f"{i['other_types']} × ~{(int(n) - sum(ts.values())) // i['other_types']:,} | {v['sigma']:.4f}, "
                 f"{v.get('tau', 0):.2f} | "
                 f"{q(v['nn_real'])} | {q(v['nn_synthetic'])} | {i['copy']['rows_per_s']:,.0f} | "
                 f"{i['gin_build']['seconds']:.1f} s | **{i['hnsw_build']['seconds']:.1f} s** | "
                 f"{i['vacuum_analyze_s']:.1f} s | {la(i['hnsw_build']['load_before'])} → "
                 f"{la(i['hnsw_build']['load_after'])} |")
    L.append("")
    L.append(f"Build settings: {json.dumps(results[sizes[0]]['info']['build_settings'])}. HNSW and GIN definitions "
             f"are the extension's own ({results[sizes[0]]['info']['indexdefs'].get('feedback_notes_embedding_idx')}).")
    for n in sizes:
        notes = results[n]["info"]["hnsw_build"].get("notices")
        if notes:
            L.append(f"HNSW build notices at {int(n):,}: {'; '.join(notes)}")
    L.append("")
    # Slice indexes
    L.append("## Slice indexes (`fb_maintain()` at its defaults)\n")
    table(L, "| notes | slices indexed | built now (kept) | fb_maintain s | largest build | slice index bytes per "
             "indexed note | recall at build (fb_eval_ann, 20 notes each): min / mean | load |")
    for n in sizes:
        m = results[n].get("maintain")
        if not m:
            continue
        idx = [v for v in m["status"].values() if v["search"] == "slice index"]
        built = [a for a in m["actions"] if a["action"] == "built"]
        kept = sum(1 for a in m["actions"] if a["action"] == "kept")
        rec = [v["recall"] for v in idx if v["recall"] is not None]
        per_note = sum(v["index_bytes"] or 0 for v in idx) / max(sum(v["notes"] for v in idx), 1)
        big = max(built, key=lambda a: a["notes"], default=None)
        L.append(f"| {int(n):,} | {len(idx)} | {len(built)} ({kept}) | {m['seconds']:.1f} | "
                 + (f"{big['notes']:,} notes in {big['build_ms'] / 1000:.1f} s" if big else "–")
                 + f" | {per_note:,.0f} | "
                 + (f"{min(rec):.3f} / {statistics.mean(rec):.3f}" if rec else "–") + f" | {la(m['load'])} |")
    L.append("")
    # Sizes
    built = lambda n: results[n]["info"].get("sizes_built") or results[n]["sizes"]
    L.append("## Size per note (bytes; total in brackets), as built\n")
    keys = ["heap", "toast", "feedback_notes_embedding_idx", "feedback_notes_search_idx",
            "feedback_notes_content_hash_key", "feedback_notes_pkey", "feedback_notes_task_type_idx", "total"]
    names = {"heap": "heap (main, fsm, vm)", "toast": "TOAST (the vectors)", "feedback_notes_embedding_idx": "HNSW",
             "feedback_notes_search_idx": "GIN (search_vector)", "feedback_notes_content_hash_key": "btree content_hash",
             "feedback_notes_pkey": "btree id", "feedback_notes_task_type_idx": "btree (task_type, status)",
             "total": "**total** (pg_total_relation_size)"}
    table(L, "| relation | " + " | ".join(f"{int(n):,} notes" for n in sizes) + " |")
    for k in keys:
        L.append(f"| {names[k]} | " + " | ".join(
            f"{built(n)[k][1]:,.0f} ({mb(built(n)[k][0])})" for n in sizes) + " |")
    L.append("")
    # Retrieval
    L.append("## fb_retrieve latency (ms)\n")
    L.append("Defaults: selective reranking (≤ 3 cross-encoder pairs), hybrid full-text candidates, candidate_k 20. "
             "*cosine*: `rerank => false`. *typical*: one of the 100 other task types (each question aimed at a team "
             "type of its subject, as `make bench`).\n")
    table(L, "| notes | task type (notes) | search path | default p50 / p95 | pairs/query | rows/query | "
             "rerank => false p50 / p95 | hybrid = off p50 / p95 | load (default row) |")
    for n, label, t in by_type(results, sizes):
        d, c = t["retrieve_default"], t["retrieve_cosine"]
        path = path_of(results[n], label, t)
        h = t["retrieve_nohybrid"]
        L.append(f"| {int(n):,} | {label} ({t['size']:,}) | {path} | **{d['p50']:.0f} / {d['p95']:.0f}** | "
                 f"{d['pairs']:.1f} | {d['rows']:.2f} | {c['p50']:.0f} / {c['p95']:.0f} | "
                 f"{h['p50']:.0f} / {h['p95']:.0f} | {la(d['load'])} |")
    L.append("")
    raised = [(n, label, t) for n, label, t in by_type(results, sizes) if "retrieve_exact" in t]
    if raised:
        L.append("Task types above `exact_scan_limit`, searched exactly instead (`SET pg_feedback.exact_scan_limit = "
                 "1000000000`), and how often the HNSW path returned the same notes as the exact path (*same "
                 "lessons*: variants of one sample lesson count as one lesson):\n")
        table(L, "| notes | task type (notes) | exact: default p50 / p95 | exact: rerank => false p50 / p95 | same "
                 "notes as exact (default / cosine) | same lessons (default / cosine) | load |")
        for n, label, t in raised:
            d, c = t["retrieve_exact"], t["retrieve_exact_cosine"]
            a, ac = t["agreement"], t["agreement_cosine"]
            L.append(f"| {int(n):,} | {label} ({t['size']:,}) | **{d['p50']:.0f} / {d['p95']:.0f}** | "
                     f"{c['p50']:.0f} / {c['p95']:.0f} | {a[0]:.2f} / {ac[0]:.2f} | {a[1]:.2f} / {ac[1]:.2f} | "
                     f"{la(d['load'])} |")
        L.append("")
    L.append("")
    # Candidates
    L.append("## Candidate stage: recall@20 against exact search (ms are p50 of the SQL call)\n")
    L.append("*auto* is what fb_retrieve runs (the task type's slice index when fb_maintain built one, else exact "
             "at ≤ `exact_scan_limit` notes, else the global HNSW index; iterative scans); *index forced* takes the "
             "index path (the slice index if any, else the global one) whatever the size; *nearest found*: "
             "share of queries whose exact nearest note is the path's first; *lesson recall*: share of the distinct "
             "sample lessons among the exact 20 (variants of one lesson count once) that the path's 20 include; "
             "*full-text* is the hybrid stage (`_fb_lexical_candidates`, 20 rows). Best cosine: mean similarity of "
             "the nearest note.\n")
    table(L, "| notes | task type (notes) | auto: recall / nearest found / lesson recall / ms | index forced: recall / "
             "nearest found / lesson recall / returned / ms | exact ms (p95) | full-text ms (p95) | best cosine |")
    for n, label, t in by_type(results, sizes):
        cd = t["candidates"]
        a, h = cd["auto"], cd["ann"]
        L.append(f"| {int(n):,} | {label} ({t['size']:,}) | {a['recall']:.3f} / {a['top1']:.2f} / "
                 f"{a['lesson_recall']:.3f} / {a['p50']:.1f} | {h['recall']:.3f} / {h['top1']:.2f} / "
                 f"{h['lesson_recall']:.3f} / {h['returned']:.1f} / {h['p50']:.1f} | "
                 f"{cd['exact']['p50']:.1f} ({cd['exact']['p95']:.1f}) | {cd['lexical_p50']:.1f} "
                 f"({cd['lexical_p95']:.1f}) | {cd['best_cosine']:.3f} |")
    L.append("")
    L.append("As a tenant's role (`scale_t07`: the shared half of the notes and its own 0.5%; the candidate "
             "search then filters about half of each slice):\n")
    table(L, "| notes | task type (notes) | auto: recall / nearest found / ms | exact ms | default p50 / p95 | "
             "rerank => false p50 / p95 |")
    for n, label, t in by_type(results, sizes):
        tt = t.get("tenant")
        if not tt:
            continue
        a = tt["candidates"]["auto"]
        d, c = tt["retrieve_default"], tt["retrieve_cosine"]
        L.append(f"| {int(n):,} | {label} ({t['size']:,}) | {a['recall']:.3f} / {a['top1']:.2f} / {a['p50']:.1f} | "
                 f"{tt['candidates']['exact']['p50']:.1f} | **{d['p50']:.0f} / {d['p95']:.0f}** | "
                 f"{c['p50']:.0f} / {c['p95']:.0f} |")
    L.append("")
    for n in sizes:
        e = results[n]["eval_ann"]
        L.append(f"- fb_eval_ann at {int(n):,} (random notes as queries, seeded): recall {e['recall']:.3f}, "
                 f"{e['returned']:.1f} of 20 returned, {e['queries']} queries.")
    L.append("")
    # ef sweep
    L.append("## The global HNSW index, hnsw.ef_search (iterative scan, relaxed order): recall@20 (lesson recall) / p50 "
             "ms\n")
    L.append("What a task type without a slice index gets above `exact_scan_limit`: the extension's query on the "
             "global HNSW index run directly with session settings (`_fb_candidates` pins ef_search 400 "
             "in its definition). *plain 40*: no iterative scan (what a query without pgvector 0.8's iterative scan "
             "gets).\n")
    table(L, "| notes | task type (notes) | plain 40 | " + " | ".join(f"ef {ef}" for ef in sm.EF_SWEEP) + " |")
    for n, label, t in by_type(results, sizes):
        s = t.get("ef_sweep")
        if not s:
            continue
        s = {int(k) if str(k).isdigit() else k: v for k, v in s.items()}   # JSON turns the ef keys into strings
        p = s["plain ef 40"]
        cells = [f"{p['recall']:.3f} ({p['lesson_recall']:.2f}) / {p['p50']:.1f}, {p['returned']:.1f} rows"]
        cells += [f"{s[ef]['recall']:.3f} ({s[ef]['lesson_recall']:.2f}) / {s[ef]['p50']:.1f}"
                  + ("" if s[ef]["returned"] >= 19.95 else f", {s[ef]['returned']:.1f} rows") for ef in sm.EF_SWEEP]
        L.append(f"| {int(n):,} | {label} ({t['size']:,}) | " + " | ".join(cells) + " |")
    L.append("")
    # partial
    parts = [(n, lbl, p) for n in sizes for lbl, p in (results[n].get("partial") or {}).items()]
    if parts:
        efs = list(parts[0][2]["plain"])
        L.append("## Per-task_type partial HNSW index (built, measured, rolled back): recall@20 (lesson recall) / p50\n")
        L.append("*shipped*: the extension's HNSW query (`(task_type = $2) IS TRUE`, iterative scan, ef_search 400), "
                 "which keeps to the global index; *plain*: `task_type = $2`, which the planner matches to the partial "
                 "index (plain HNSW scan, no iterative scan). Exact search of the same type for comparison.\n")
        table(L, "| notes | task type (notes) | build | size | exact ms | shipped | " + " | ".join(
            f"plain ef {ef}" for ef in efs) + " | plans (shipped → plain) |")
        f = lambda x: f"{x['recall']:.3f} ({x['lesson_recall']:.2f}) / {x['p50']:.1f} ms" + (
            "" if x["returned"] >= 19.95 else f", {x['returned']:.1f} rows")
        for n, lbl, p in parts:
            t = results[n]["types"][lbl]
            L.append(f"| {int(n):,} | {lbl} ({t['size']:,}) | {p['build_s']:.1f} s | {mb(p['size'])} | "
                     f"{t['candidates']['exact']['p50']:.1f} | {f(p['shipped'])} | "
                     + " | ".join(f(p["plain"][ef]) for ef in efs) + f" | {p['plan_shipped']} → {p['plan_plain']} |")
        L.append("")
    # variants
    for n in sizes:
        v = results[n].get("variants")
        if not v:
            continue
        L.append(f"## HNSW m / ef_construction at {int(n):,} notes (each replaces the index in a rolled-back "
                 f"transaction; measured {results[n].get('variants_measured_at', '')}): recall@20 (lesson recall) / "
                 f"p50 ms, iterative scan\n")
        labels = [lbl for lbl in next(iter(v.values())) if lbl not in ("build_s", "size", "load_before", "load_after")]
        table(L, "| m, ef_construction | build | size | " + " | ".join(
            f"{lbl} ef {ef}" for lbl in labels for ef in (40, 100, 400)) + " | load before → after build |")
        for key, x in v.items():
            L.append(f"| {key} | {x['build_s']:.1f} s | {mb(x['size'])} | " + " | ".join(
                f"{x[lbl][ef]['recall']:.3f} ({x[lbl][ef]['lesson_recall']:.2f}) / {x[lbl][ef]['p50']:.1f}"
                for lbl in labels for ef in ("40", "100", "400"))
                + f" | {la(x['load_before'])} → {la(x['load_after'])} |")
        L.append("")
    # ingest
    L.append("## Ingest (rolled back)\n")
    table(L, "| notes | fb_ingest_batch, 500 new notes of one tenant, merging and revisions on (default) | same, "
             "merging off | restore-path COPY into the indexed table (5,000 rows) | bulk restore COPY without HNSW/GIN (dataset "
             "build) | VACUUM after |")
    for n in sizes:
        r = results[n]
        d, o, c = r["ingest_default"], r["ingest_nodedup"], r["restore_indexed"]
        acts = ", ".join(f"{k} {v}" for k, v in sorted(d["actions"].items()))
        L.append(f"| {int(n):,} | {d['rows_per_s']:.0f} rows/s ({acts}; load {la(d['load'])}) | "
                 f"{o['rows_per_s']:.0f} rows/s (load {la(o['load'])}) | {c['rows_per_s']:,.0f} rows/s (load "
                 f"{la(c['load'])}) | {r['info']['copy']['rows_per_s']:,.0f} rows/s | {r['vacuum_s']:.1f} s |")
    L.append("")
    for n in sizes:
        m = results[n].get("merge_check")
        if m:
            L.append(f"- Near-duplicate check per new note at {int(n):,} (`_fb_candidates(..., 2, 'auto', tenant, "
                     f"scoped => true)`, 20 stored notes of the 100 real task types as vectors): p50 "
                     f"{m['scoped']['p50']:.1f} ms (p95 {m['scoped']['p95']:.1f}), scoped to one tenant "
                     f"{m['scoped_tenant']['p50']:.1f} ms (p95 {m['scoped_tenant']['p95']:.1f}); the same call "
                     f"unscoped, as "
                     f"retrieval filters: p50 {m['unscoped']['p50']:.1f} ms (p95 {m['unscoped']['p95']:.1f}); load "
                     f"{la(m['load'])}.")
    L.append("")
    # 10M, simulated from the largest size measured
    top = sizes[-1]
    if int(top) >= 1_000_000:
        r = results[top]
        per_note = built(top)["total"][1]
        slice_idx = [v for v in (r.get("maintain") or {}).get("status", {}).values() if v["search"] == "slice index"]
        slice_per_note = sum(v["index_bytes"] or 0 for v in slice_idx) / max(sum(v["notes"] for v in slice_idx), 1)
        ten = r["types"].get("scale_10pct")
        L.append("## 10M notes, simulated (not built)\n")
        L.append(f"- **Size**: {per_note:,.0f} bytes per note as built at {int(top):,} (heap, TOAST, global HNSW, GIN, "
                 f"btrees) plus {slice_per_note:,.0f} per note in a slice index: ≈ "
                 f"{(per_note + slice_per_note) * 10_000_000 / 1024 ** 3:,.0f} GB at 10M notes. Retrieval stays in "
                 f"memory when heap, vectors and the indexes it reads are cached: RAM for shared_buffers + page "
                 f"cache of about that much.")
        if ten:
            d, c, a = ten["retrieve_default"], ten["retrieve_cosine"], ten["candidates"]["auto"]
            L.append(f"- **A typical task type at 10M** (0.9%: ~90,000 notes) is the size of the 10% type measured at "
                     f"{int(top):,} ({ten['size']:,} notes, its own slice index): candidate recall {a['recall']:.3f}, "
                     f"fb_retrieve p50 {d['p50']:.0f} ms by default, {c['p50']:.0f} ms with rerank => false. A slice "
                     f"index's cost depends on the slice, not the table, so this is the measurement that carries "
                     f"over; the rest of a 10M table only adds to its size.")
        L.append("- **Not measured**: a 1,000,000-note slice (the 10% type at 10M). A slice index search reads "
                 "20 of its sqrt(notes) lists, about 20 × sqrt(notes) vectors: 6,300 at 100,000 notes, 20,000 at "
                 "1,000,000, so expect it to cost about 3× the 100,000-note slice's; its build grows about linearly "
                 "(measured above per 100,000 notes) and holds writes unless built by hand with `CREATE INDEX "
                 "CONCURRENTLY` (feedback_index_status.build_statement).\n")
    # throughput
    for n in sizes:
        tp = results[n].get("throughput")
        if not tp:
            continue
        L.append(f"## Throughput at {int(n):,} notes (typical task types, defaults, caches off, 30 s)\n")
        table(L, "| sessions | queries/s | p50 ms | p95 ms | errors | load before → after |")
        for x in tp:
            L.append(f"| {x['clients']} | {x['qps']:.1f} | {x['p50']:.0f} | {x['p95']:.0f} | {x['errors']} | "
                     f"{la(x['load'])} → {la(x['load_after'])} |")
        L.append("")
    return "\n".join(L)


def main():
    if sys.argv[1:] == ["--report"]:   # the report again from results/scale.json, nothing measured
        saved = json.loads(OUT_JSON.read_text())
        OUT_MD.write_text(report(saved["results"], saved["env"]) + "\n")
        print("\n".join(summary_lines(saved["results"])))
        return
    env = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": machine()}
    log(f"scale sizes {SIZES}; cluster {DATADIR.relative_to(ROOT)} on port {PORT}")
    env["server"] = start_cluster()
    real = sd.real_notes(SOURCE_PORT, PORT, log=log)
    picked, warm = sm.questions(QUERIES)
    results, vecs = {}, {}
    try:
        for n in SIZES:
            results[str(n)] = measure_size(n, real, picked, warm, vecs, n == max(SIZES))
            OUT_JSON.parent.mkdir(exist_ok=True)
            OUT_JSON.write_text(json.dumps({"env": env, "results": results}, indent=1, default=str))
    finally:
        if not os.environ.get("FB_SCALE_KEEP"):
            pg("stop")
    env["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    env["minutes"] = (time.perf_counter() - T_START) / 60
    OUT_JSON.write_text(json.dumps({"env": env, "results": results}, indent=1, default=str))
    md = report(results, env)
    OUT_MD.write_text(md + "\n")
    print(md)
    for line in summary_lines(results):
        print(line)
    log(f"written {OUT_MD.relative_to(ROOT)} and {OUT_JSON.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

"""End-to-end: revisions and near-duplicates (issue 20) through real sessions.

- The comparison on the labelled pairs of data/dedup/pairs (three independent authors; the shipped model was fitted
  on P and Q, R is held out): per author and label, the share of pairs that would merge with cosine >= 0.92 alone
  (before) and with fb_compare_notes (after), and the share called revisions, printed. On the held-out author no
  more than 2% of revisions or of distinct pairs may merge. Duplicate recall is printed, not gated: 0.8.0 merges
  about 0.02 of the held-out rewordings (cosine >= 0.92 alone: 0.05); the issue's 85% is NOT met.
- Squatting is closed: a lesson planted by one writer and corrected by another is not merged into; the correction
  waits for a reviewer as "revises #id", and once approved it is what a reader gets; both notes keep their own
  source and created_by, the older is superseded, not deleted.
- A merge never changes the surviving note's text, source or created_by; the merged reporter is recorded.
- pg_feedback.revisions: review (fb_reject keeps the older), newest (the older is superseded at once),
  keep_both (both stay, feedback_conflicts lists the pair, retrieval takes the newer).
- fb_merge folds a held revision that was a rewording after all into the older note; fb_restore brings a
  superseded note back.
- fb_unmerge brings a merged report back as its own pending note with its reporter and source;
  fb_find_conflicts finds revisions stored with merging off and records them.

Run by make test against the end-to-end server: python tests/e2e/revisions.py PORT PG_BINDIR
"""

import collections
import json
import os
import sys

from harness import connect as _connect, ensure_roles, expect_error, fresh_database, one, run_tests

PORT = int(sys.argv[1])
BINDIR = sys.argv[2]
DB = "fb_revisions"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REVIEWER, READER, WRITER1, WRITER2 = "fb_r_reviewer", "fb_r_reader", "fb_r_writer1", "fb_r_writer2"
HELD_OUT = "R"
MAX_FALSE_MERGES = 0.02

PLANTED = "Numeric-looking input concatenated into SQL is not injectable once it is cast to int; no need to bind it."
CORRECTION = "Numeric-looking input concatenated into SQL is still injectable; bind it as a parameter."
QUERY = "Is a numeric id from the URL concatenated into a SELECT injectable?"


def connect(user="postgres", autocommit=True):
    return _connect(PORT, DB, user=user, autocommit=autocommit)


def pairs():
    out = []
    for author in "PQR":
        with open(os.path.join(ROOT, "data", "dedup", "pairs", f"{author}.jsonl")) as f:
            out += [json.loads(line) for line in f if line.strip()]
    return out


def setup():
    fresh_database(PORT, DB)
    ensure_roles(PORT, (REVIEWER, READER, WRITER1, WRITER2), (),
                 [("feedback_reviewer", [REVIEWER]), ("feedback_reader", [READER]),
                  ("feedback_writer", [WRITER1, WRITER2])])


def set_revisions(mode):
    with connect() as c:
        c.execute(f"ALTER DATABASE {DB} SET pg_feedback.revisions = '{mode}'")


def ingest(user, task_type, lesson, source):
    with connect(user) as c:
        return c.execute("SELECT id, action FROM fb_ingest(%s, '', %s, %s, %s)",
                         (task_type, lesson, lesson, source)).fetchone()


def note(nid):
    with connect(REVIEWER) as c:
        cur = c.execute("SELECT id, status, lesson, source, created_by, supersedes, superseded_by, report_count "
                        "FROM feedback_notes WHERE id = %s", (nid,))
        return dict(zip([d.name for d in cur.description], cur.fetchone()))


def test_pairs_per_kind_and_the_held_out_gate():
    rows = pairs()
    table = collections.defaultdict(lambda: [0, 0, 0, 0])
    with connect(READER) as c:
        for p in rows:
            v = one(c, "SELECT fb_compare_notes(%s, %s, %s)", (p["a"], p["b"], p["task_type"]))
            label = f"revision:{p['revision_kind']}" if p["label"] == "revision" else p["label"]
            t = table[(p["id"].split("-")[0], label)]
            t[0] += 1
            t[1] += v["similarity"] >= 0.92
            t[2] += v["verdict"] == "duplicate"
            t[3] += v["verdict"] == "revision"
    print(f"# {'author':<7} {'label':<30} {'pairs':>5} {'cos>=.92':>9} {'merged':>7} {'revision':>9}")
    for (author, label), (n, before, merged, revision) in sorted(table.items()):
        print(f"# {author:<7} {label:<30} {n:>5} {before / n:>9.2f} {merged / n:>7.2f} {revision / n:>9.2f}")
    held = {label: t for (author, label), t in table.items() if author == HELD_OUT}
    for label, (n, _, merged, _) in held.items():
        if label != "duplicate":
            assert merged / n <= MAX_FALSE_MERGES + 1e-9, (label, merged, n)
    revisions = [t for label, t in held.items() if label.startswith("revision:")]
    assert sum(t[2] for t in revisions) / sum(t[0] for t in revisions) <= MAX_FALSE_MERGES, revisions
    n, _, merged, _ = held["duplicate"]
    print(f"# held-out duplicates merged: {merged}/{n} (not gated: the issue's 85% is not met)")
    distinct = [p for p in rows if p["label"] == "distinct"]
    assert distinct, "the corpus has distinct pairs"


def test_squatting_is_closed():
    set_revisions("review")
    planted_id, action = ingest(WRITER1, "sql_injection_scan", PLANTED, "writer-one")
    assert action == "inserted", action
    new_id, action = ingest(WRITER2, "sql_injection_scan", CORRECTION, "security-team")
    assert action == "pending" and new_id != planted_id, (new_id, action)
    with connect(REVIEWER) as c:
        q = c.execute("SELECT id, revises, revises_lesson FROM feedback_review_queue WHERE id = %s", (new_id,)).fetchone()
        assert q == (new_id, planted_id, PLANTED), q
        assert one(c, "SELECT count(*) FROM feedback_conflicts WHERE older_id = %s AND newer_id = %s",
                   (planted_id, new_id)) == 1
    with connect(READER) as c:
        got = [r[0] for r in c.execute("SELECT id FROM fb_retrieve(%s, 'sql_injection_scan', min_score => -100)",
                                       (QUERY,))]
        assert planted_id in got and new_id not in got, got
    with connect(REVIEWER) as c:
        assert one(c, "SELECT fb_approve(%s, 'the planted lesson is wrong')", (new_id,)) is True
        assert one(c, "SELECT count(*) FROM feedback_audit WHERE action = 'supersede' AND note_id = %s",
                   (planted_id,)) == 1
    with connect(READER) as c:
        got = [r[0] for r in c.execute("SELECT id FROM fb_retrieve(%s, 'sql_injection_scan', min_score => -100)",
                                       (QUERY,))]
        assert new_id in got and planted_id not in got, got
    old, new = note(planted_id), note(new_id)
    assert (old["status"], old["superseded_by"], old["source"], old["created_by"], old["lesson"]) == \
        ("superseded", new_id, "writer-one", WRITER1, PLANTED), old
    assert (new["status"], new["supersedes"], new["source"], new["created_by"]) == \
        ("active", planted_id, "security-team", WRITER2), new


def test_a_merge_keeps_the_surviving_notes_text_and_provenance():
    # A lesson reported again with a word added: the comparison merges it.
    pair = {"task_type": "error_handling_review", "a": "Close the file handle in a finally block.",
            "b": "Close the file handle in a finally block, please."}
    with connect(READER) as c:
        v = one(c, "SELECT fb_compare_notes(%s, %s, %s)", (pair["a"], pair["b"], pair["task_type"]))
        assert v["verdict"] == "duplicate", v
    first, action = ingest(WRITER1, pair["task_type"], pair["a"], "first-reporter")
    assert action == "inserted", action
    into, action = ingest(WRITER2, pair["task_type"], pair["b"], "security-team")
    assert (into, action) == (first, "merged"), (into, action)
    n = note(first)
    assert (n["lesson"], n["source"], n["created_by"], n["report_count"]) == \
        (pair["a"], "first-reporter", WRITER1, 2), n
    with connect(REVIEWER) as c:
        m = c.execute("SELECT lesson, source, merged_by FROM feedback_note_merges WHERE into_id = %s",
                      (first,)).fetchone()
        assert m == (pair["b"], "security-team", WRITER2), m


def test_revision_modes():
    older = "Set the HTTP client timeout to at least 30 seconds for calls to the billing service."
    newer = "Set the HTTP client timeout to at most 5 seconds for calls to the billing service."
    # review: fb_reject keeps the older one live.
    set_revisions("review")
    a, _ = ingest(WRITER1, "perf_review", older, "r1")
    b, action = ingest(WRITER2, "perf_review", newer, "r2")
    assert action == "pending", action
    with connect(REVIEWER) as c:
        assert one(c, "SELECT fb_reject(%s, 'the old bound stands')", (b,)) is True
    assert note(a)["status"] == "active" and note(b)["status"] == "rejected"
    # review, then a reviewer finds it a rewording after all: fb_merge folds it into the older, provenance kept.
    a2, _ = ingest(WRITER1, "perf_review", "Cache the parsed config for at least 10 minutes.", "r1")
    b2, action = ingest(WRITER2, "perf_review", "Cache the parsed config for at least 600 seconds.", "r2")
    assert action == "pending", action
    with connect(REVIEWER) as c:
        assert one(c, "SELECT fb_merge(%s, %s, 'the same bound')", (b2, a2)) is True
        assert c.execute("SELECT lesson, source, merged_by FROM feedback_note_merges WHERE into_id = %s",
                         (a2,)).fetchone() == ("Cache the parsed config for at least 600 seconds.", "r2", WRITER2)
    assert (note(a2)["report_count"], note(a2)["source"]) == (2, "r1")
    # newest: the older is superseded at once.
    set_revisions("newest")
    c1, _ = ingest(WRITER1, "logging", "Log the request id but never the auth token.", "r1")
    c2, action = ingest(WRITER2, "logging", "Log the auth token but never the request id.", "r2")
    assert action == "inserted", action
    assert (note(c1)["status"], note(c1)["superseded_by"], note(c2)["supersedes"]) == ("superseded", c2, c1)
    with connect(REVIEWER) as c:
        assert one(c, "SELECT fb_deprecate(%s, 'the reversal was wrong')", (c2,)) is True
        assert one(c, "SELECT fb_restore(%s, 'the original stands')", (c1,)) is True
    assert (note(c1)["status"], note(c1)["superseded_by"]) == ("active", None)
    # keep_both: both stay active, the pair is listed, retrieval takes the newer; deprecating it brings the older back.
    set_revisions("keep_both")
    d1, _ = ingest(WRITER1, "api_design", "Use the v2 payments endpoint; v1 is deprecated.", "r1")
    d2, action = ingest(WRITER2, "api_design", "Use the v1 payments endpoint; v2 is deprecated.", "r2")
    assert action == "inserted", action
    assert note(d1)["status"] == "active" and note(d2)["status"] == "active"
    with connect(REVIEWER) as c:
        assert one(c, "SELECT retrieved FROM feedback_conflicts WHERE older_id = %s", (d1,)) == "newer"
    with connect(READER) as c:
        got = [r[0] for r in c.execute("SELECT id FROM fb_retrieve('which payments endpoint', 'api_design', "
                                       "min_score => -100)")]
        assert d2 in got and d1 not in got, got
    with connect(REVIEWER) as c:
        assert one(c, "SELECT fb_deprecate(%s, 'wrong after all')", (d2,)) is True
    with connect(READER) as c:
        got = [r[0] for r in c.execute("SELECT id FROM fb_retrieve('which payments endpoint', 'api_design', "
                                       "min_score => -100)")]
        assert d1 in got, got
    set_revisions("review")


def test_unmerge_brings_a_merged_report_back():
    a = "Release the database connection in a finally block."
    b = "Release the database connection in a finally block, please."
    first, _ = ingest(WRITER1, "error_handling_review", a, "first")
    into, action = ingest(WRITER2, "error_handling_review", b, "second-reporter")
    assert (into, action) == (first, "merged"), (into, action)
    with connect(REVIEWER) as c:
        merge_id = one(c, "SELECT id FROM feedback_note_merges WHERE into_id = %s", (first,))
        new_id = one(c, "SELECT fb_unmerge(%s, 'it was folded away')", (merge_id,))
        assert one(c, "SELECT count(*) FROM feedback_note_merges WHERE id = %s", (merge_id,)) == 0
        assert one(c, "SELECT count(*) FROM feedback_audit WHERE action = 'unmerge' AND note_id = %s", (new_id,)) == 1
    n = note(new_id)
    assert (n["status"], n["lesson"], n["source"], n["created_by"]) == ("pending", b, "second-reporter", WRITER2), n
    assert note(first)["report_count"] == 1
    with connect(REVIEWER) as c:
        expect_error(c, "SELECT fb_unmerge(%s)", "P0002", (merge_id,))
    with connect(WRITER1) as c:
        expect_error(c, "SELECT fb_unmerge(1)", "42501")


def test_find_conflicts_in_a_store_loaded_with_merging_off():
    older = "Always use UTC timestamps in log lines."
    newer = "Always use local time, not UTC, in log lines."
    with connect() as c:
        c.execute("SET pg_feedback.dup_threshold = 1")
        ids = [one(c, "SELECT id FROM fb_ingest('log_format', '', %s, %s, 'import')", (t, t)) for t in (older, newer)]
    with connect(REVIEWER) as c:
        found = c.execute("SELECT older_id, newer_id, recorded FROM fb_find_conflicts('log_format')").fetchall()
        assert found == [(ids[0], ids[1], False)], found
        found = c.execute("SELECT older_id, newer_id, recorded FROM fb_find_conflicts('log_format', true)").fetchall()
        assert found == [(ids[0], ids[1], True)], found
        assert one(c, "SELECT retrieved FROM feedback_conflicts WHERE older_id = %s", (ids[0],)) == "newer"
    with connect(READER) as c:
        got = [r[0] for r in c.execute("SELECT id FROM fb_retrieve('timestamps in log lines', 'log_format', "
                                       "min_score => -100)")]
        assert ids[1] in got and ids[0] not in got, got


if __name__ == "__main__":
    setup()
    run_tests("revisions", [test_pairs_per_kind_and_the_held_out_gate, test_squatting_is_closed,
                            test_a_merge_keeps_the_surviving_notes_text_and_provenance, test_revision_modes,
                            test_unmerge_brings_a_merged_report_back, test_find_conflicts_in_a_store_loaded_with_merging_off])

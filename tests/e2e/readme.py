"""End-to-end: every ```sql block of README.md runs, in README order, against a fresh database, and returns what the
README shows.

Conventions in README.md (keep them when editing it):

- Every ```sql block runs, in order, in database fb_readme, which starts empty. The README's own
  `CREATE EXTENSION pg_feedback CASCADE` block creates the extension; right after that block the sample notes, their
  contexts and the golden questions are loaded as `make demo` loads them (scripts/demo.sh). Blocks in other
  languages (sh, ini, text, ...) are not run.
- A block runs as postgres (a superuser) unless an HTML comment on the line just before its fence says otherwise:
      <!-- readme-test: as ROLE -->          run as that login role (a block before it creates the role)
      <!-- readme-test: error SQLSTATE -->   the block's last statement must fail with that SQLSTATE (the ones
                                             before it must succeed)
      <!-- readme-test: skip (reason) -->    not run; say why
  Directives combine with ';', e.g. <!-- readme-test: as app_reader; error 42501 -->.
- A ```text block right after a sql block (only blank lines between) is that block's expected output:
    - a psql-style table (header, a ---+--- line, rows; a "(N rows)" footer is optional) is compared, cell by cell
      with whitespace trimmed, with the result of the block's last statement that returned rows: column names and
      every row, in order;
    - any other text is compared, whitespace-normalised, with the single value that statement returned;
    - after an error block: an "ERROR:  message" line, optionally followed by "HINT:  hint", compared with the
      error's message and hint.
  Values compare as Postgres prints them (text output: t / f, NULL as an empty cell).
- Each role keeps one session for the whole run: a SET in one block holds in that role's later blocks.
- Roles the README creates (CREATE ROLE name) are dropped before the run (left over from a failed run) and after it,
  with the database.

A mismatch prints what the block returned, formatted like psql, so a README example can be corrected by pasting it.

Run by make test against the end-to-end server: python tests/e2e/readme.py PORT PG_BINDIR
"""

import os
import re
import sys

import psycopg
import psycopg.postgres
from psycopg.adapt import Loader

from harness import connect as _connect, load_sample, one, run_tests

PORT = int(sys.argv[1])
BINDIR = sys.argv[2]
DB = "fb_readme"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(ROOT, "README.md")
NUMERIC_OIDS = {20, 21, 23, 26, 700, 701, 1700}   # int8, int2, int4, oid, float4, float8, numeric: right-aligned


class AsText(Loader):
    """Every value as Postgres prints it, as psql shows it."""

    def load(self, data):
        return bytes(data).decode()


# --- README parsing ----------------------------------------------------------------------------------------------

class Block:
    def __init__(self, line, sql, directives, expected):
        self.line, self.sql, self.expected = line, sql, expected
        self.role, self.error, self.skip = "postgres", None, None
        for d in directives:
            d = d.strip()
            if m := re.fullmatch(r"as\s+(\w+)", d):
                self.role = m.group(1)
            elif m := re.fullmatch(r"error\s+([0-9A-Z]{5})", d):
                self.error = m.group(1)
            elif m := re.fullmatch(r"skip\s*\((.+)\)", d):
                self.skip = m.group(1)
            elif d:
                raise ValueError(f"README.md line {line}: unknown readme-test directive {d!r}")


def split_directives(text):
    """Directives separated by ';' (a skip reason in parentheses may hold ';' of its own)."""
    out, cur, depth = [], "", 0
    for c in text:
        depth += (c == "(") - (c == ")")
        if c == ";" and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += c
    return out + [cur]


def parse_readme(path):
    """The README's sql blocks, each with its directives and the text block that follows it (or None)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i
        i += 1
        body = []
        while i < len(lines) and not re.match(r"^```\s*$", lines[i]):
            body.append(lines[i])
            i += 1
        i += 1   # the closing fence
        if lang != "sql":
            continue
        directives = []
        prev = lines[start - 1].strip() if start > 0 else ""
        if m := re.fullmatch(r"<!--\s*readme-test:(.*?)-->", prev):
            directives = split_directives(m.group(1))
        j = i
        while j < len(lines) and not lines[j].strip():
            j += 1
        expected = None
        if j < len(lines) and re.match(r"^```text\s*$", lines[j]):
            k = j + 1
            out = []
            while k < len(lines) and not re.match(r"^```\s*$", lines[k]):
                out.append(lines[k])
                k += 1
            expected = out
            i = k + 1
        blocks.append(Block(start + 1, "\n".join(body), directives, expected))
    return blocks


def split_statements(sql):
    """The statements of a block, split at semicolons outside quotes, dollar quotes and comments."""
    out, cur, i, n = [], [], 0, len(sql)
    while i < n:
        c = sql[i]
        if c == "-" and sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            cur.append(sql[i:j])
            i = j
        elif c == "/" and sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            j = n if j < 0 else j + 2
            cur.append(sql[i:j])
            i = j
        elif c in "'\"":
            j = i + 1
            while j < n:
                if sql[j] == c and j + 1 < n and sql[j + 1] == c:
                    j += 2
                elif sql[j] == c:
                    break
                else:
                    j += 1
            cur.append(sql[i:j + 1])
            i = j + 1
        elif c == "$" and (m := re.match(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$", sql[i:])):
            tag = m.group(0)
            j = sql.find(tag, i + len(tag))
            j = n if j < 0 else j + len(tag)
            cur.append(sql[i:j])
            i = j
        elif c == ";":
            out.append("".join(cur))
            cur = []
            i += 1
        else:
            cur.append(c)
            i += 1
    out.append("".join(cur))
    # Drop what is only whitespace and comments.
    return [s.strip() for s in out if re.sub(r"--[^\n]*|/\*.*?\*/|\s", "", s, flags=re.S)]


def created_roles(blocks):
    return sorted({r.lower() for b in blocks for r in re.findall(r"(?i)\bCREATE\s+ROLE\s+(\w+)", b.sql)})


# --- Comparing ---------------------------------------------------------------------------------------------------

def norm(s):
    return " ".join(s.split())


def render(columns, types, rows):
    """A result as psql prints it (aligned, no footer)."""
    cells = [["" if v is None else v for v in row] for row in rows]
    width = [max([len(c)] + [max((len(x) for x in r[k].split("\n")), default=0) for r in cells])
             for k, c in enumerate(columns)]
    head = "|".join(f" {c.center(width[k])} " for k, c in enumerate(columns)).rstrip()
    rule = "+".join("-" * (w + 2) for w in width)
    body = []
    for r in cells:
        line = []
        for k, v in enumerate(r):
            v = v.replace("\n", "\\n")
            line.append(f" {v.rjust(width[k]) if types[k] in NUMERIC_OIDS else v.ljust(width[k])} ")
        body.append("|".join(line).rstrip())
    return "\n".join([head, rule] + body)


def is_table(expected):
    return len(expected) >= 2 and re.fullmatch(r"-+(\+-+)*", expected[1].strip()) is not None


def compare(expected, result):
    """None when the result is what the README shows, else why not."""
    columns, types, rows = result
    if is_table(expected):
        want_cols = [c.strip() for c in expected[0].split("|")]
        want_rows = [[c.strip() for c in line.split("|")] for line in expected[2:]
                     if line.strip() and not re.fullmatch(r"\(\d+ rows?\)", line.strip())]
        got_rows = [["" if v is None else v.strip() for v in row] for row in rows]
        if want_cols != columns:
            return f"columns {columns}, README shows {want_cols}"
        if want_rows != got_rows:
            return "rows differ"
        return None
    if len(rows) != 1 or len(columns) != 1:
        return f"{len(rows)} rows of {len(columns)} columns, README shows one value"
    got = "" if rows[0][0] is None else rows[0][0]
    return None if norm(got) == norm("\n".join(expected)) else "value differs"


def compare_error(expected, err):
    want = [line for line in expected if line.strip()]
    got_message = f"ERROR:  {err.diag.message_primary}"
    if not want or norm(want[0]) != norm(got_message):
        return f"message {got_message!r}"
    hint = next((line for line in want[1:] if line.startswith("HINT:")), None)
    if hint is not None and norm(hint) != norm(f"HINT:  {err.diag.message_hint or ''}"):
        return f"hint 'HINT:  {err.diag.message_hint}'"
    return None


# --- Running -----------------------------------------------------------------------------------------------------

sessions = {}


def session(role):
    conn = sessions.get(role)
    if conn is None or conn.closed or conn.broken:
        conn = _connect(PORT, DB, user=role)
        for t in psycopg.postgres.types:
            for oid in (t.oid, getattr(t, "array_oid", 0)):
                if oid:
                    conn.adapters.register_loader(oid, AsText)
        sessions[role] = conn
    return conn


loaded = False


def run_block(block):
    global loaded
    conn = session(block.role)
    statements = split_statements(block.sql)
    assert statements, "an empty sql block"
    last = None
    for n, stmt in enumerate(statements, 1):
        try:
            cur = conn.execute(stmt)
        except psycopg.Error as e:
            if block.error and n == len(statements):
                assert e.sqlstate == block.error, f"expected SQLSTATE {block.error}, got {e.sqlstate}: {e}"
                if block.expected is not None:
                    why = compare_error(block.expected, e)
                    assert why is None, f"{why}; README shows {block.expected}"
                return
            raise AssertionError(f"statement {n} failed ({e.sqlstate}): {e}") from None
        if cur.description is not None:
            last = ([d.name for d in cur.description], [d.type_code for d in cur.description], cur.fetchall())
    assert not block.error, f"expected ERROR {block.error}, the block succeeded"
    if not loaded and one(session("postgres"), "SELECT count(*) FROM pg_extension WHERE extname = 'pg_feedback'") != "0":
        load_sample(PORT, DB, BINDIR)
        loaded = True
    if block.expected is not None:
        assert last is not None, "no statement returned rows, the README shows output"
        why = compare(block.expected, last)
        if why is not None:
            print(f"# README.md line {block.line}: {why}; the block returned:", flush=True)
            for line in render(*last).split("\n"):
                print(f"#   {line}", flush=True)
            raise AssertionError(f"{why} (README.md line {block.line})")


def drop_roles(roles):
    with _connect(PORT, "postgres") as c:
        for role in roles:
            if one(c, "SELECT count(*) FROM pg_roles WHERE rolname = %s", (role,)):
                c.execute(f'DROP ROLE "{role}"')


def fresh_database(roles):
    with _connect(PORT, "postgres") as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    drop_roles(roles)
    with _connect(PORT, "postgres") as c:
        c.execute(f"CREATE DATABASE {DB}")


def cleanup(roles):
    for conn in sessions.values():
        conn.close()
    with _connect(PORT, "postgres") as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    drop_roles(roles)


def make_test(block, index):
    first = next((line.strip() for line in block.sql.split("\n") if line.strip() and not line.startswith("--")), "")
    label = f"block_{index}_line_{block.line}_as_{block.role}" + (f"_error_{block.error}" if block.error else "")

    def test():
        run_block(block)

    test.__name__ = f"{label}: {first[:60]}"
    return test


def test_conventions_hold():
    blocks = parse_readme(README)
    assert len(blocks) >= 20, f"only {len(blocks)} sql blocks"
    assert sum(b.skip is not None for b in blocks) <= 5, "more than five blocks skipped"
    assert any("CREATE EXTENSION pg_feedback" in b.sql and b.skip is None for b in blocks), \
        "no README block creates the extension"
    with open(README, encoding="utf-8") as f:
        text = f.read()
    assert "/work/" not in text and "/tmp/" not in text, "a machine-specific path in README.md"


def self_test():
    """The comparison catches a changed example: a table and a value that differ are reported."""
    result = (["id", "action"], [20, 25], [["204", "inserted"]])
    assert compare([" id  |  action", "-----+----------", " 204 | inserted"], result) is None
    assert compare([" id  |  action", "-----+----------", " 204 | updated"], result) == "rows differ"
    assert compare(["204"], (["id"], [20], [["205"]])) == "value differs"
    assert split_statements("SELECT 'a;b'; SELECT $x$;$x$; -- c;\nSELECT 1") == \
        ["SELECT 'a;b'", "SELECT $x$;$x$", "-- c;\nSELECT 1"]


if __name__ == "__main__":
    blocks = parse_readme(README)
    roles = created_roles(blocks)
    fresh_database(roles)
    tests = [test_conventions_hold, self_test]
    ran = skipped = compared = 0
    for index, block in enumerate(blocks, 1):
        if block.skip is not None:
            print(f"# skip README.md line {block.line}: {block.skip}")
            skipped += 1
            continue
        ran += 1
        compared += block.expected is not None
        tests.append(make_test(block, index))
    print(f"# README.md: {len(blocks)} sql blocks, {ran} run ({compared} with their output compared, "
          f"{sum(b.error is not None for b in blocks)} expecting an error), {skipped} skipped", flush=True)
    try:
        run_tests("readme", tests)
    finally:
        cleanup(roles)

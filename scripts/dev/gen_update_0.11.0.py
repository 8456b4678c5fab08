"""Writes the objects of sql/pg_feedback--0.10.0--0.11.0.sql from sql/search.sql: the header (everything before the
first COMMENT) is kept as it is in the update script, the rest is each changed object's definition and comment,
taken from the source as CREATE OR REPLACE. No Rust function changed in 0.11.0.

    python3 scripts/dev/gen_update_0.11.0.py          # rewrite the update script
    python3 scripts/dev/gen_update_0.11.0.py --check  # exit 1 if it differs from what the sources give

tests/e2e/survive.py and tests/regress/sql/oldextversions.sql check the result against a fresh install.
"""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
SOURCE = (ROOT / "sql" / "search.sql").read_text()
TARGET = ROOT / "sql" / "pg_feedback--0.10.0--0.11.0.sql"
# (kind, name as it starts its CREATE, kind of its COMMENT); a TABLE entry takes the comment only.
OBJECTS = [("TABLE", "feedback_slice_indexes", "TABLE"),
           ("FUNCTION", "_fb_slice_index(", "FUNCTION"),
           ("FUNCTION", "_fb_slice_index_statement(", "FUNCTION"),
           ("FUNCTION", "_fb_candidates(", "FUNCTION"),
           ("FUNCTION", "_fb_lexical_candidates(", "FUNCTION"),
           ("FUNCTION", "fb_maintain(", "FUNCTION"),
           ("VIEW", "feedback_index_status", "VIEW")]


def comment_end(start):
    return SOURCE.index("';\n", start) + 3


def part(kind, name, comment_kind):
    if kind == "TABLE":
        c = SOURCE.index(f"COMMENT ON TABLE {name}")
        return SOURCE[c:comment_end(c)]
    a = SOURCE.index(f"CREATE {kind} {name}")
    c = SOURCE.index(f"COMMENT ON {comment_kind} {name}", a)
    return SOURCE[a:comment_end(c)].replace(f"CREATE {kind} {name}", f"CREATE OR REPLACE {kind} {name}", 1)


def main():
    current = TARGET.read_text()
    head = current[:current.index("COMMENT ON TABLE feedback_slice_indexes")]
    text = head + "\n".join(part(*o) for o in OBJECTS)
    if "--check" in sys.argv[1:]:
        sys.exit(0 if text == current else f"{TARGET.name} differs from what sql/search.sql gives")
    TARGET.write_text(text)


if __name__ == "__main__":
    main()

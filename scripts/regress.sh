#!/usr/bin/env bash
# pg_regress against a running server: regress.sh HOST PORT [TEST ...] (default: every test in tests/regress/sql).
# It (re)creates database fb_regress; the server needs pg_feedback installed (scripts/install_ext.sh, make install)
# and the connecting role (PGUSER, default postgres) must be a superuser. Output goes to $FB_REGRESS_OUT
# (default .run/installcheck); differences are printed. make test and make installcheck both run it.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

host="${1:?usage: regress.sh HOST PORT [TEST ...]}"
port="${2:?port}"
shift 2
tests="$*"
[ -n "$tests" ] || tests=$(cd "$ROOT/tests/regress/sql" && ls *.sql | sed 's/\.sql$//' | sort)
for t in $tests; do
    [ -f "$ROOT/tests/regress/sql/$t.sql" ] || die "no regression test $t (tests/regress/sql/$t.sql)"
done
out="${FB_REGRESS_OUT:-$RUN/installcheck}"
rm -rf "$out"
mkdir -p "$out"
pgc="$(target_pg_config)"
pg_regress="$(dirname "$("$pgc" --pgxs)")/../test/regress/pg_regress"
status=0
"$pg_regress" --host="$host" --port="$port" --user="${PGUSER:-postgres}" --dbname=fb_regress \
    --bindir="$("$pgc" --bindir)" --inputdir="$ROOT/tests/regress" --outputdir="$out" $tests || status=$?
if [ "$status" -ne 0 ] && [ -f "$out/regression.diffs" ]; then
    cat "$out/regression.diffs"
fi
exit "$status"

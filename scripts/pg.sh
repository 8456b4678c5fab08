#!/usr/bin/env bash
# Manages a repo-local Postgres cluster of the embedded install.
#   pg.sh start DATADIR PORT   initdb if needed, start on 127.0.0.1:PORT if not running; pg_feedback is in
#                              shared_preload_libraries (its shared inference worker runs) unless FB_PRELOAD=0
#   pg.sh stop DATADIR         stop if running
# As root, the cluster belongs to and runs as the dedicated OS user (see common.sh).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

cmd="${1:?usage: pg.sh start|stop DATADIR [PORT]}"
datadir="${2:?datadir}"
port="${3:-$FB_PORT}"

running() { [ -f "$datadir/postmaster.pid" ] && as_pg "$(pg_bin pg_ctl)" -D "$datadir" status >/dev/null 2>&1; }

case "$cmd" in
start)
    if [ ! -f "$datadir/PG_VERSION" ]; then
        log "creating a Postgres cluster in ${datadir#$ROOT/}"
        mkdir -p "$datadir"
        is_root && chown "$PG_OS_USER" "$datadir"
        chmod 700 "$datadir"
        as_pg "$(pg_bin initdb)" -D "$datadir" -U postgres --auth=trust --encoding=UTF8 --locale=C >/dev/null
    fi
    if running; then
        exit 0
    fi
    mkdir -p "$RUN"
    sockdir="$datadir/sock"
    as_pg mkdir -p "$sockdir"
    preload=pg_feedback
    [ "${FB_PRELOAD:-1}" = 0 ] && preload=
    log "starting Postgres 18 on 127.0.0.1:$port (shared_preload_libraries='$preload')"
    as_pg "$(pg_bin pg_ctl)" -D "$datadir" -l "$datadir/postgres.log" -w -t 60 \
        -o "-p $port -c listen_addresses=127.0.0.1 -k $sockdir -c shared_preload_libraries=$preload" start >/dev/null \
        || { tail -n 20 "$datadir/postgres.log" >&2; die "Postgres did not start (log above)"; }
    ;;
stop)
    if running; then
        as_pg "$(pg_bin pg_ctl)" -D "$datadir" -m fast -w stop >/dev/null
        log "stopped Postgres (${datadir#$ROOT/})"
    fi
    ;;
*) die "unknown command $cmd" ;;
esac

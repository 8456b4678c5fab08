#!/usr/bin/env bash
# make psql: psql on the demo database.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
exec "$(pg_bin psql)" -h 127.0.0.1 -p "$FB_PORT" -U postgres -d feedback "$@"

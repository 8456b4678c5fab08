//! pg_feedback's core, free of Postgres: everything here is plain Rust, tested with `cargo test`.
//!
//! - [`model`]: ONNX Runtime sessions, tokenizers, pooling, manifests and checksums.
//! - [`note`]: how a note's content is normalised and hashed into its id.
//! - [`rank`]: relevance floor, best-first order, newer-first on near ties.
//! - [`prompt`]: fenced, numbered lessons under a token budget; neutralising untrusted note text.
//! - [`dedup`]: whether a newer lesson duplicates, revises or differs from an older one.
//! - [`guard`]: prompt-injection screening and secret redaction of ingested notes.
//!
//! The Postgres extension (the `pg_feedback` crate) is a thin shell over these functions.

pub mod dedup;
pub mod guard;
pub mod model;
pub mod note;
pub mod prompt;
pub mod rank;

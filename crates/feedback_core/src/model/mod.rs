//! Local model inference: ONNX Runtime sessions + Hugging Face tokenizers, no Postgres.
//!
//! [`ModelHost`] is the one seam between "who runs the model" and its callers: the extension asks a host for
//! embeddings and scores and never touches a session itself. [`LocalHost`] runs the models in the calling
//! process; [`remote::RemoteHost`] forwards to the extension's shared background worker, which answers with
//! [`remote::serve`].

pub mod cancel;
mod encoder;
mod error;
mod host;
mod manifest;
mod pin;
mod pooling;
mod query_cache;
pub mod remote;
mod runtime;

pub use encoder::{plan_runs, CrossEncoder, Embedder, RunLimits, SessionOptions, TextRole};
pub use error::{ModelError, Result};
pub use host::{chunks, HostConfig, HostStats, LocalHost, ModelHost, CPU_ARENA};
pub use manifest::{sha256_hex, Manifest, ModelKind, Pooling, MANIFEST_FILE};
pub use pin::{installed_key, model_key, split_key};
pub use pooling::{cosine, l2_normalize, pool};
pub use query_cache::{Cache, QueryCache, ScoreCache};

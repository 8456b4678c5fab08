//! Embedding in SQL. The public functions (`fb_embed`, `fb_embed_query`, `fb_embed_batch`) are SQL wrappers in
//! `sql/notes.sql` over `_fb_embed_with`, which embeds with a pinned model key (`name@sha256`): the database's
//! active model (`feedback_embedding_slots`), or the one `fb_reembed` moves to.

use std::path::PathBuf;

use feedback_core::model::{model_key, Manifest, ModelKind, TextRole};
use pgrx::prelude::*;

use crate::{gucs, host};

/// Embeddings of many texts with the pinned model `model` (`name@sha256`) in batched model runs, one row per
/// input in input order (NULL for a NULL input). Refuses when the installed files are not the pinned model's.
/// Queries go through the backend's query cache (what it does not hold is embedded in one call).
#[pg_extern(stable, strict, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_embed_with(model: &str, texts: Array<&str>, query: bool) -> SetOfIterator<'static, Option<Vec<f32>>> {
    let inputs: Vec<Option<&str>> = texts.iter().collect();
    host::check_texts("text", inputs.iter().flatten().copied());
    if query {
        return SetOfIterator::new(host::skip_nulls(&inputs, |present| host::embed_queries(model, present)));
    }
    SetOfIterator::new(host::skip_nulls(&inputs, |present| host::embed(model, present, TextRole::Document)))
}

/// The key (`name@sha256` of its weights) of the installed embedding model `name`.
#[pg_extern(stable, strict, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_model_key(name: &str) -> String {
    host::model_key(name)
}

/// The key of the model `pg_feedback.embedding_model` names: the one a database pins with its first note.
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_default_model() -> String {
    host::model_key(&gucs::embedding_model())
}

/// The configured cross-encoder's name; empty when reranking is not configured.
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn fb_rerank_model() -> String {
    gucs::rerank_model()
}

/// Number of tokens the embedding model's tokenizer makes of a text (special tokens excluded, no truncation).
#[pg_extern(stable, strict, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn fb_count_tokens(text: &str) -> i32 {
    host::count_tokens(text) as i32
}

/// The model folders in `pg_feedback.model_dir` with a readable manifest, sorted by name.
fn installed() -> Vec<(String, Manifest)> {
    let dir = gucs::host_config().model_dir;
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect())
        .unwrap_or_default();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|path| {
            let folder = path.file_name()?.to_string_lossy().into_owned();
            Manifest::read(&path).ok().map(|m| (folder, m))
        })
        .collect()
}

/// One installed model as `_fb_installed_models` (and the 0.1.0 `fb_models`) show it.
pub type ModelRow = (String, String, i32, Option<String>, String, i32, String, Option<String>, String);

/// The installed models' rows: name, kind, dimensions, pooling, query prefix, max tokens, weights sha256, the
/// key an embedding model is pinned by, source.
pub fn installed_rows() -> Vec<ModelRow> {
    installed()
        .into_iter()
        .map(|(folder, m)| {
            let key = (m.kind == ModelKind::Embedding).then(|| model_key(&folder, &m));
            let sha256 = m.files.get(&m.onnx).cloned().unwrap_or_default();
            let pooling = m.pooling.map(|p| p.as_str().to_string());
            (
                folder,
                m.kind.as_str().to_string(),
                m.dimensions as i32,
                pooling,
                m.query_prefix,
                m.max_tokens as i32,
                sha256,
                key,
                m.source,
            )
        })
        .collect()
}

/// The models installed in `pg_feedback.model_dir`, read from their manifests (checksums are verified on load,
/// not here), with the key an embedding model is pinned by.
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_installed_models() -> TableIterator<
    'static,
    (
        name!(name, String),
        name!(kind, String),
        name!(dimensions, i32),
        name!(pooling, Option<String>),
        name!(query_prefix, String),
        name!(max_tokens, i32),
        name!(sha256, String),
        name!(key, Option<String>),
        name!(source, String),
    ),
> {
    TableIterator::new(installed_rows())
}

/// This backend's model activity: runs and texts, loaded sessions. Resets when the session ends.
#[pg_extern(volatile, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn fb_model_stats() -> TableIterator<
    'static,
    (
        name!(embed_runs, i64),
        name!(texts_embedded, i64),
        name!(rerank_runs, i64),
        name!(pairs_scored, i64),
        name!(loaded_embedding_models, i32),
        name!(loaded_cross_encoders, i32),
        name!(query_cache_entries, i64),
        name!(query_cache_hits, i64),
        name!(query_cache_misses, i64),
    ),
> {
    let s = host::stats();
    let (entries, hits, misses) = host::query_cache_stats();
    TableIterator::once((
        s.embed_runs as i64,
        s.texts_embedded as i64,
        s.rerank_runs as i64,
        s.pairs_scored as i64,
        s.loaded_embedders as i32,
        s.loaded_cross_encoders as i32,
        entries as i64,
        hits as i64,
        misses as i64,
    ))
}

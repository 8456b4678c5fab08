//! Embedding in SQL. The public functions (`fb_embed`, `fb_embed_query`, `fb_embed_batch`) are SQL wrappers in
//! `sql/notes.sql` that cast these `real[]` results to `vector(384)`.

use feedback_core::model::{Manifest, TextRole};
use pgrx::prelude::*;

use crate::{gucs, host};

fn role(query: bool) -> TextRole {
    if query {
        TextRole::Query
    } else {
        TextRole::Document
    }
}

/// One text's embedding (queries through the backend's cache). STABLE, not IMMUTABLE: the result depends on
/// the configured model.
#[pg_extern(stable, strict, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_embed(text: &str, query: bool) -> Vec<f32> {
    if query {
        host::embed_query(text)
    } else {
        host::embed(&[text], TextRole::Document).pop().unwrap_or_default()
    }
}

/// Embeddings of many texts in batched model runs, one row per input in input order (NULL for a NULL input).
#[pg_extern(stable, strict, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_embed_batch(texts: Array<&str>, query: bool) -> SetOfIterator<'static, Option<Vec<f32>>> {
    let inputs: Vec<Option<&str>> = texts.iter().collect();
    SetOfIterator::new(host::skip_nulls(&inputs, |present| host::embed(present, role(query))))
}

/// The configured cross-encoder's name; empty when reranking is not configured.
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn fb_rerank_model() -> String {
    gucs::rerank_model()
}

/// The configured embedding model's name, as recorded on the notes it embeds.
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn fb_embedding_model() -> String {
    gucs::embedding_model()
}

/// Number of tokens the embedding model's tokenizer makes of a text (special tokens excluded, no truncation).
#[pg_extern(stable, strict, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn fb_count_tokens(text: &str) -> i32 {
    crate::notes::check_size("text", text);
    host::count_tokens(text) as i32
}

/// The models installed in `pg_feedback.model_dir`, read from their manifests (checksums are verified on load,
/// not here).
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn fb_models() -> TableIterator<
    'static,
    (
        name!(name, String),
        name!(kind, String),
        name!(dimensions, i32),
        name!(pooling, Option<String>),
        name!(query_prefix, String),
        name!(max_tokens, i32),
        name!(source, String),
    ),
> {
    let dir = gucs::host_config().model_dir;
    let mut rows = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&dir) {
        let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
        paths.sort();
        for path in paths {
            if let Ok(m) = Manifest::read(&path) {
                let folder = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                rows.push((
                    folder,
                    m.kind.as_str().to_string(),
                    m.dimensions as i32,
                    m.pooling.map(|p| p.as_str().to_string()),
                    m.query_prefix,
                    m.max_tokens as i32,
                    m.source,
                ));
            }
        }
    }
    TableIterator::new(rows)
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

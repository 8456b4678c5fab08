//! Cross-encoder reranking in SQL.

use pgrx::prelude::*;

use crate::host;

/// Cross-encoder relevance of each passage to `query`, in input order, from batched model runs bounded by
/// `pg_feedback.embed_batch_size` rows and `pg_feedback.max_batch_tokens` padded tokens (cancellable between
/// runs). Scores are the model's raw logits (higher is more relevant; not probabilities). A NULL passage scores
/// NULL.
#[pg_extern(stable, strict, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn fb_rerank(query: &str, passages: Array<&str>) -> Vec<Option<f32>> {
    let inputs: Vec<Option<&str>> = passages.iter().collect();
    host::skip_nulls(&inputs, |present| host::rerank(query, present))
}

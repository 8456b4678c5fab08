//! Cross-encoder reranking in SQL: every passage (`fb_rerank`), or only those the first stage cannot settle
//! (`_fb_rerank_selective`, what fb_retrieve uses).

use feedback_core::rank::select::Selective;
use pgrx::prelude::*;

use crate::error::FbError;
use crate::host;

/// Cross-encoder relevance of each passage to `query`, in input order, from batched model runs bounded by
/// `pg_feedback.embed_batch_size` rows and `pg_feedback.max_batch_tokens` padded tokens (cancellable between
/// runs). Scores are the model's raw logits (higher is more relevant; not probabilities). A NULL passage scores
/// NULL.
#[pg_extern(stable, strict, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn fb_rerank(query: &str, passages: Array<&str>) -> Vec<Option<f32>> {
    let inputs: Vec<Option<&str>> = passages.iter().collect();
    host::check_pairs(query, inputs.iter().flatten().copied());
    host::skip_nulls(&inputs, |present| host::rerank(query, present))
}

/// Selective reranking (see `feedback_core::rank::select`): scores, in stages and through the backend's score
/// cache, only the candidates the settings' policy selects; NULL for the others. Candidates in first-stage order,
/// with their cosine similarities; `settings` is `_fb_settings(task_type, model)`, NULL scores every candidate
/// at once (a ranking mode).
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_rerank_selective(
    query: Option<&str>,
    passages: Option<Vec<Option<String>>>,
    cosines: Option<Vec<Option<f32>>>,
    settings: default!(Option<pgrx::JsonB>, "NULL"),
) -> Option<Vec<Option<f32>>> {
    let (query, passages, cosines) = (query?, passages?, cosines?);
    if passages.len() != cosines.len() {
        FbError::invalid_argument("passages and cosines differ in length", "Pass one cosine per passage.").report();
    }
    // Every pass the policy might score, capped before the first stage runs.
    host::check_pairs(query, passages.iter().flatten().map(String::as_str));
    let policy = match settings {
        Some(s) => crate::retrieve::settings(s).selective(false),
        None => Selective::ALL,
    };
    // A NULL passage or cosine is never scored (NaN is never eligible).
    let cos: Vec<f32> = passages.iter().zip(&cosines).map(|(p, c)| p.as_ref().and(*c).unwrap_or(f32::NAN)).collect();
    let scores = policy
        .run(&cos, |batch| {
            let texts: Vec<&str> = batch.iter().map(|&i| passages[i].as_deref().unwrap_or_default()).collect();
            Ok::<_, ()>(host::rerank_cached(query, &texts))
        })
        .unwrap_or_default();
    Some(scores.into_iter().map(|s| s.filter(|x| !x.is_nan())).collect())
}

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
/// cache, only the candidates the policy selects; NULL for the others. Candidates in first-stage order, with
/// their cosine similarities. A NULL bound is no bound; `selective => false` scores every candidate at once.
#[allow(clippy::too_many_arguments)]
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_rerank_selective(
    query: Option<&str>,
    passages: Option<Vec<Option<String>>>,
    cosines: Option<Vec<Option<f32>>>,
    selective: default!(bool, true),
    max_pairs: default!(Option<i32>, "NULL"),
    min_cosine: default!(Option<f32>, "NULL"),
    cosine_gap: default!(Option<f32>, "NULL"),
    stage: default!(Option<i32>, "NULL"),
    decided: default!(Option<f32>, "NULL"),
    decided_gap: default!(Option<f32>, "NULL"),
) -> Option<Vec<Option<f32>>> {
    let (query, passages, cosines) = (query?, passages?, cosines?);
    if passages.len() != cosines.len() {
        FbError::invalid_argument("passages and cosines differ in length", "Pass one cosine per passage.").report();
    }
    // Every pass the policy might score, capped before the first stage runs.
    host::check_pairs(query, passages.iter().flatten().map(String::as_str));
    let all = Selective::ALL;
    let policy = if selective {
        Selective {
            max_pairs: max_pairs.map_or(all.max_pairs, |n| n.max(0) as usize),
            min_cosine: min_cosine.unwrap_or(all.min_cosine),
            cosine_gap: cosine_gap.unwrap_or(all.cosine_gap),
            stage: stage.map_or(all.stage, |n| n.max(1) as usize),
            decided: decided.unwrap_or(all.decided),
            decided_gap: decided_gap.unwrap_or(all.decided_gap),
        }
    } else {
        all
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

//! Ranking for `fb_retrieve` (sql/retrieve.sql): the floor, best first, newer first on near ties.

use feedback_core::rank::{rank, Scored};
use pgrx::prelude::*;

use crate::error::FbError;
use crate::gucs;

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// 1-based positions into the candidate arrays of the notes to return, in rank order. `logits` says the
/// scores are cross-encoder logits: near ties are then judged on their probabilities (sigmoid), cosine
/// similarities as they are.
#[pg_extern(immutable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_rank(
    scores: Vec<Option<f32>>,
    created_at: Vec<Option<TimestampWithTimeZone>>,
    floor: f32,
    logits: bool,
    final_k: i32,
) -> Vec<i32> {
    if scores.len() != created_at.len() {
        FbError::invalid_argument("scores and created_at differ in length", "Pass one created_at per score.").report();
    }
    let scale = |x: f32| if logits { sigmoid(x) } else { x };
    let micros = |t: &Option<TimestampWithTimeZone>| t.map(|t| t.into_inner()).unwrap_or(i64::MIN);
    let candidates: Vec<Scored> = scores
        .iter()
        .zip(&created_at)
        .map(|(s, t)| Scored { score: s.map(scale).unwrap_or(f32::NEG_INFINITY), created_at: micros(t) })
        .collect();
    let margin = gucs::tie_margin() as f32;
    rank(&candidates, scale(floor), margin, final_k.max(0) as usize).into_iter().map(|i| i as i32 + 1).collect()
}

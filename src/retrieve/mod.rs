//! Ranking for `fb_retrieve` (sql/retrieve.sql): the floor and relative cut, best first, newer first on near
//! ties, all on the score that ranked the notes.

use feedback_core::rank::{rank_cut, Cut, Scored};
use pgrx::prelude::*;

use crate::error::FbError;

/// 1-based positions into the candidate arrays of the notes to return, in rank order: scores at or above
/// `floor` and within `relative_cut` of the best (NULL: no relative cut), best first, the newer of two notes
/// within `margin` first, at most `final_k`. A NULL score is never kept.
#[pg_extern(immutable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_rank_notes(
    scores: Vec<Option<f32>>,
    created_at: Vec<Option<TimestampWithTimeZone>>,
    floor: f32,
    relative_cut: Option<f32>,
    margin: f32,
    final_k: i32,
) -> Vec<i32> {
    if scores.len() != created_at.len() {
        FbError::invalid_argument("scores and created_at differ in length", "Pass one created_at per score.").report();
    }
    let candidates: Vec<Scored> = scores
        .iter()
        .zip(&created_at)
        .map(|(s, t)| Scored {
            score: s.unwrap_or(f32::NAN),
            created_at: t.map(|t| t.into_inner()).unwrap_or(i64::MIN),
        })
        .collect();
    let cut = Cut {
        floor,
        relative: relative_cut.filter(|r| *r >= 0.0).unwrap_or(f32::INFINITY),
        margin,
        limit: final_k.max(0) as usize,
    };
    rank_cut(&candidates, &cut).into_iter().map(|i| i as i32 + 1).collect()
}

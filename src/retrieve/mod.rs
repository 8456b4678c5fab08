//! Ranking for `fb_retrieve` (sql/retrieve.sql): the retrieval settings of a call arrive whole
//! (`_fb_settings`, one jsonb) and become the core's cut (floor, relative cut, near-tie margin, most notes) for
//! the score that ranked; best first, newer first on near ties.

use feedback_core::rank::settings::{Scorer, Settings};
use feedback_core::rank::{rank_cut, Scored};
use pgrx::prelude::*;

use crate::error::FbError;

/// The settings value `_fb_settings` returns, parsed; an ERROR when it is not one.
pub fn settings(value: pgrx::JsonB) -> Settings {
    Settings::from_json(value.0).unwrap_or_else(|e| {
        FbError::invalid_argument(
            format!("not a retrieval settings value: {e}"),
            "Pass _fb_settings(task_type, model), optionally with keys replaced (settings || '{\"max_notes\": 3}').",
        )
        .report()
    })
}

/// 1-based positions into the candidate arrays of the notes to return, in rank order, cut as `settings` say
/// for the scorer that ranked ('cross-encoder', 'cosine' or 'decision'): a caller's `min_score` replaces the
/// floor and turns the relative cut off, `final_k` replaces the most notes, never more than `candidate_k`.
/// A NULL score is never kept.
#[pg_extern(immutable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_rank_notes(
    scores: Vec<Option<f32>>,
    created_at: Vec<Option<TimestampWithTimeZone>>,
    settings: Option<pgrx::JsonB>,
    scorer: &str,
    min_score: Option<f32>,
    final_k: Option<i32>,
    candidate_k: i32,
) -> Vec<i32> {
    if scores.len() != created_at.len() {
        FbError::invalid_argument("scores and created_at differ in length", "Pass one created_at per score.").report();
    }
    let scorer = Scorer::parse(scorer).unwrap_or_else(|| {
        FbError::invalid_argument(format!("unknown scorer \"{scorer}\""), "cross-encoder, cosine or decision.").report()
    });
    let cut = match settings {
        Some(s) => self::settings(s).cut(scorer, min_score, final_k, candidate_k),
        None => {
            FbError::invalid_argument("a ranking needs its settings", "Pass _fb_settings(task_type, model).").report()
        }
    };
    let candidates: Vec<Scored> = scores
        .iter()
        .zip(&created_at)
        .map(|(s, t)| Scored {
            score: s.unwrap_or(f32::NAN),
            created_at: t.map(|t| t.into_inner()).unwrap_or(i64::MIN),
        })
        .collect();
    rank_cut(&candidates, &cut).into_iter().map(|i| i as i32 + 1).collect()
}

/// The `pg_feedback.*` retrieval settings' values, under the keys `_fb_settings` merges the calibrated rows of
/// `feedback_retrieval_settings` over (the column names; `rerank_enabled` is `pg_feedback.rerank`).
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_retrieval_gucs() -> pgrx::JsonB {
    pgrx::JsonB(serde_json::Value::Object(crate::gucs::retrieval_settings()))
}

//! The retrieval settings in force for one call, as one value: what the database merges for a task_type (its
//! `pg_feedback.*` settings, then the '*' row and the task_type's row of `feedback_retrieval_settings`) arrives
//! here whole, as JSON, and becomes the [`Selective`] policy and the [`Cut`] of the scorer that ranked. The "no
//! bound" values the settings use (a relative cut of -1) are read here and nowhere else.
//!
//! Adding a setting: its `pg_feedback.*` setting, its `feedback_retrieval_settings` column (when it can be
//! calibrated per task_type), and a field here. Field names are the column names.

use serde::Deserialize;

use super::select::Selective;
use super::Cut;

/// Every retrieval setting, merged. Unknown keys are ignored (the settings value also carries the database's
/// own switches), a missing one is an error.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Settings {
    /// Whether a question's candidates are reranked by the cross-encoder (the task_type's calibration and
    /// `pg_feedback.rerank` both allow it).
    pub rerank: bool,
    /// Least cross-encoder score (a logit) a note needs.
    pub rerank_floor: f32,
    /// Notes scoring more than this many logits below the best are dropped; negative: no relative cut.
    pub relative_cut: f32,
    /// Most notes returned when reranking.
    pub max_notes: i32,
    /// Least cosine similarity a note needs when ranking by cosine.
    pub cosine_floor: f32,
    /// Notes more than this below the best cosine are dropped; negative: no relative cut.
    pub cosine_relative_cut: f32,
    /// Most notes returned when ranking by cosine.
    pub cosine_max_notes: i32,
    /// Whether the cross-encoder scores only the candidates the first stage cannot settle.
    pub selective: bool,
    pub rerank_max_pairs: i32,
    pub rerank_min_cosine: f32,
    pub rerank_cosine_gap: f32,
    pub rerank_stage: i32,
    pub rerank_decided: f32,
    pub rerank_decided_gap: f32,
    /// Near-tie margins (newer first) on the cross-encoder's logits and on cosines.
    pub rerank_tie_margin: f32,
    pub cosine_tie_margin: f32,
}

/// The score that ranked a call's candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scorer {
    CrossEncoder,
    Cosine,
    /// The learned decision for code inputs: its probabilities, already thresholded per note.
    Decision,
}

impl Scorer {
    /// `scored_by` as fb_retrieve reports it.
    pub fn parse(name: &str) -> Option<Scorer> {
        match name {
            "cross-encoder" => Some(Scorer::CrossEncoder),
            "cosine" => Some(Scorer::Cosine),
            "decision" => Some(Scorer::Decision),
            _ => None,
        }
    }
}

/// A relative cut as [`Cut`] holds it: a negative setting is none.
fn relative(cut: f32) -> f32 {
    if cut >= 0.0 {
        cut
    } else {
        f32::INFINITY
    }
}

impl Settings {
    /// Parses the merged settings value.
    pub fn from_json(value: serde_json::Value) -> Result<Settings, String> {
        serde_json::from_value(value).map_err(|e| e.to_string())
    }

    /// Which candidates the cross-encoder scores: every one when `every` (a caller's min_score asks for a
    /// ranking) or when selective reranking is off.
    pub fn selective(&self, every: bool) -> Selective {
        if every || !self.selective {
            return Selective::ALL;
        }
        Selective {
            max_pairs: self.rerank_max_pairs.max(0) as usize,
            min_cosine: self.rerank_min_cosine,
            cosine_gap: self.rerank_cosine_gap,
            stage: self.rerank_stage.max(1) as usize,
            decided: self.rerank_decided,
            decided_gap: self.rerank_decided_gap,
        }
    }

    /// How the notes scored by `scorer` are cut: a caller's `min_score` replaces the floor and turns the relative
    /// cut off (a ranking mode); `final_k` replaces the most notes; never more than `candidate_k`. The decision's
    /// scores are already thresholded: only `min_score` (default 0) and `final_k` apply to them.
    pub fn cut(&self, scorer: Scorer, min_score: Option<f32>, final_k: Option<i32>, candidate_k: i32) -> Cut {
        let (floor, cut, margin, max_notes) = match scorer {
            Scorer::CrossEncoder => (self.rerank_floor, self.relative_cut, self.rerank_tie_margin, self.max_notes),
            Scorer::Cosine => {
                (self.cosine_floor, self.cosine_relative_cut, self.cosine_tie_margin, self.cosine_max_notes)
            }
            Scorer::Decision => (0.0, -1.0, 0.0, candidate_k),
        };
        Cut {
            floor: min_score.unwrap_or(floor),
            relative: if min_score.is_some() { f32::INFINITY } else { relative(cut) },
            margin,
            limit: final_k.unwrap_or(max_notes).min(candidate_k).max(0) as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings() -> Settings {
        Settings::from_json(json!({
            "rerank": true, "rerank_floor": -5.75, "relative_cut": 0.5, "max_notes": 1,
            "cosine_floor": 0.64, "cosine_relative_cut": -1, "cosine_max_notes": 2, "selective": true,
            "rerank_max_pairs": 3, "rerank_min_cosine": -1, "rerank_cosine_gap": 0.08, "rerank_stage": 2,
            "rerank_decided": -2, "rerank_decided_gap": 0.01, "rerank_tie_margin": 0.5, "cosine_tie_margin": 0,
            "rerank_enabled": true
        }))
        .unwrap()
    }

    #[test]
    fn a_missing_setting_is_an_error() {
        let err = Settings::from_json(json!({"rerank": true})).unwrap_err();
        assert!(err.contains("missing field"), "{err}");
    }

    #[test]
    fn cuts_follow_the_scorer() {
        let s = settings();
        let c = s.cut(Scorer::CrossEncoder, None, None, 20);
        assert_eq!(c, Cut { floor: -5.75, relative: 0.5, margin: 0.5, limit: 1 });
        let c = s.cut(Scorer::Cosine, None, Some(5), 20);
        assert_eq!(c, Cut { floor: 0.64, relative: f32::INFINITY, margin: 0.0, limit: 5 });
    }

    #[test]
    fn min_score_is_a_ranking_mode_and_candidate_k_bounds() {
        let s = settings();
        let c = s.cut(Scorer::CrossEncoder, Some(-9.0), Some(50), 20);
        assert_eq!(c, Cut { floor: -9.0, relative: f32::INFINITY, margin: 0.5, limit: 20 });
        let c = s.cut(Scorer::Decision, None, Some(3), 20);
        assert_eq!(c, Cut { floor: 0.0, relative: f32::INFINITY, margin: 0.0, limit: 3 });
    }

    #[test]
    fn selective_policy_or_every_candidate() {
        let s = settings();
        let p = s.selective(false);
        assert_eq!((p.max_pairs, p.stage, p.cosine_gap), (3, 2, 0.08));
        assert_eq!(s.selective(true), Selective::ALL);
        assert_eq!(Settings { selective: false, ..s }.selective(false), Selective::ALL);
    }
}

//! Turning scored candidates into the final answer: keep those at or above the relevance floor, best first,
//! and when two kept notes score within `margin` of each other, put the newer one first (a later correction
//! usually supersedes an earlier one). Zero results is a normal answer.
//!
//! - [`select`]: which candidates the cross-encoder scores at all (selective reranking).
//! - [`settings`]: the retrieval settings of one call, as one value, and the cut and policy they make.
//! - [`metrics`]: what a returned list is worth against graded judgments (fb_eval and calibration).
//! - [`calibrate`]: choosing floors, cuts and the selective-reranking bounds on golden questions.
//! - [`code`]: reading code inputs: prose or code, a diff's post-image, segments, identifier words.
//! - [`decide`]: the learned final decision for code inputs (features, logistic regression, threshold).

pub mod calibrate;
pub mod code;
pub mod decide;
pub mod metrics;
pub mod select;
pub mod settings;

/// One scored candidate: its relevance score and when the note was created (any monotonic unit).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    pub score: f32,
    pub created_at: i64,
}

/// Indices into `candidates` of the notes to return, in rank order (at most `limit`).
pub fn rank(candidates: &[Scored], floor: f32, margin: f32, limit: usize) -> Vec<usize> {
    let mut kept: Vec<usize> = (0..candidates.len()).filter(|&i| candidates[i].score >= floor).collect();
    // Best score first; equal scores newer first; then input order for determinism.
    kept.sort_by(|&a, &b| {
        let (x, y) = (candidates[a], candidates[b]);
        y.score.total_cmp(&x.score).then(y.created_at.cmp(&x.created_at)).then(a.cmp(&b))
    });
    // Near-ties: a newer note moves ahead of an older neighbour scoring within `margin`. Each pass swaps
    // adjacent pairs only; n passes settle it (n <= candidate count, small).
    for _ in 0..kept.len() {
        let mut swapped = false;
        for j in 1..kept.len() {
            let (older, newer) = (candidates[kept[j - 1]], candidates[kept[j]]);
            if newer.created_at > older.created_at && older.score - newer.score <= margin {
                kept.swap(j - 1, j);
                swapped = true;
            }
        }
        if !swapped {
            break;
        }
    }
    kept.truncate(limit);
    kept
}

/// How [`rank_cut`] keeps and orders notes. Scores are in the unit of the scorer that ranked them (cross-encoder
/// logits or cosine similarities): floors, cuts and margins are compared on that score itself, not on a
/// transformed one, so every kept note is ordered by the evidence that ranked it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cut {
    /// Absolute floor: a note scoring below it is never returned.
    pub floor: f32,
    /// Relative cut: a note scoring more than this below the best candidate is dropped (`f32::INFINITY`: none).
    pub relative: f32,
    /// Near-tie margin: between two kept notes within this of each other, the newer ranks first.
    pub margin: f32,
    /// Most notes returned.
    pub limit: usize,
}

/// [`rank`] with a relative cut: the floor is raised to `best - cut.relative` when that is higher. NaN scores
/// count as missing: never kept, whatever the floor.
pub fn rank_cut(candidates: &[Scored], cut: &Cut) -> Vec<usize> {
    let present: Vec<usize> = (0..candidates.len()).filter(|&i| !candidates[i].score.is_nan()).collect();
    let scored: Vec<Scored> = present.iter().map(|&i| candidates[i]).collect();
    let best = scored.iter().map(|c| c.score).fold(f32::NEG_INFINITY, f32::max);
    let floor = if cut.relative.is_finite() { cut.floor.max(best - cut.relative) } else { cut.floor };
    rank(&scored, floor, cut.margin.max(0.0), cut.limit).into_iter().map(|i| present[i]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(score: f32, created_at: i64) -> Scored {
        Scored { score, created_at }
    }

    #[test]
    fn floor_drops_everything_below_it_and_zero_is_valid() {
        let c = [s(-3.0, 1), s(-5.0, 2)];
        assert!(rank(&c, 0.0, 0.1, 3).is_empty());
        assert_eq!(rank(&c, -4.0, 0.1, 3), vec![0]);
        assert!(rank(&[], 0.0, 0.1, 3).is_empty());
    }

    #[test]
    fn best_first_and_limited() {
        let c = [s(1.0, 1), s(5.0, 1), s(3.0, 1), s(4.0, 1)];
        assert_eq!(rank(&c, 0.0, 0.0, 3), vec![1, 3, 2]);
    }

    #[test]
    fn newer_wins_a_near_tie_but_not_a_clear_gap() {
        // 0 is older and slightly better; 1 is newer within the margin: 1 first.
        let c = [s(5.0, 10), s(4.9, 20), s(2.0, 30)];
        assert_eq!(rank(&c, 0.0, 0.2, 3), vec![1, 0, 2]);
        // A clear gap keeps the better note first even if older.
        assert_eq!(rank(&c, 0.0, 0.05, 3), vec![0, 1, 2]);
    }

    fn cut(floor: f32, relative: f32, margin: f32, limit: usize) -> Cut {
        Cut { floor, relative, margin, limit }
    }

    #[test]
    fn relative_cut_drops_notes_far_below_the_best() {
        let c = [s(4.0, 1), s(3.5, 1), s(0.5, 1), s(-2.0, 1)];
        assert_eq!(rank_cut(&c, &cut(-5.0, 1.0, 0.0, 3)), vec![0, 1]);
        assert_eq!(rank_cut(&c, &cut(-5.0, f32::INFINITY, 0.0, 3)), vec![0, 1, 2]);
        // The absolute floor still applies when it is the higher of the two.
        assert_eq!(rank_cut(&c, &cut(3.8, 10.0, 0.0, 3)), vec![0]);
        // Missing (NaN) scores are never kept and never count as the best, even under an infinite floor.
        assert_eq!(rank_cut(&[s(f32::NAN, 1), s(1.0, 1)], &cut(0.0, 0.5, 0.0, 3)), vec![1]);
        assert_eq!(rank_cut(&[s(f32::NAN, 1), s(1.0, 1)], &cut(f32::NEG_INFINITY, f32::INFINITY, 0.0, 3)), vec![1]);
        assert!(rank_cut(&[], &cut(0.0, 0.5, 0.0, 3)).is_empty());
    }

    #[test]
    fn recency_margin_is_on_the_raw_score() {
        // Logits 2.0 and 1.5 are 0.5 apart (their sigmoids only 0.06): a 0.2 margin keeps the better first.
        let c = [s(2.0, 1), s(1.5, 2)];
        assert_eq!(rank_cut(&c, &cut(-9.0, f32::INFINITY, 0.2, 2)), vec![0, 1]);
        assert_eq!(rank_cut(&c, &cut(-9.0, f32::INFINITY, 0.6, 2)), vec![1, 0]);
        // A note below the floor never takes part in a tie.
        assert_eq!(rank_cut(&[s(2.0, 1), s(1.9, 5)], &cut(1.95, f32::INFINITY, 1.0, 2)), vec![0]);
    }

    #[test]
    fn exact_ties_prefer_newer() {
        let c = [s(1.0, 1), s(1.0, 2)];
        assert_eq!(rank(&c, 0.0, 0.0, 2), vec![1, 0]);
    }
}

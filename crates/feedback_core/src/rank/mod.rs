//! Turning scored candidates into the final answer: keep those at or above the relevance floor, best first,
//! and when two kept notes score within `margin` of each other, put the newer one first (a later correction
//! usually supersedes an earlier one). Zero results is a normal answer.

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

    #[test]
    fn exact_ties_prefer_newer() {
        let c = [s(1.0, 1), s(1.0, 2)];
        assert_eq!(rank(&c, 0.0, 0.0, 2), vec![1, 0]);
    }
}

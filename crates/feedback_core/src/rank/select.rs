//! Selective reranking: the cross-encoder costs ~15 ms per pair on one core, so it scores only the candidates
//! the first stage cannot settle. Candidates come in first-stage order (best first); a candidate is eligible
//! when its cosine similarity is at least `min_cosine` and within `cosine_gap` of the best candidate's, and at
//! most `max_pairs` are eligible. Eligible candidates are scored `stage` at a time; once one of them scores at
//! least `decided` (a logit), later stages score only candidates within `decided_gap` of the best cosine.
//! Candidates never scored are never returned. [`Selective::ALL`] scores every candidate in one stage.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Selective {
    pub max_pairs: usize,
    pub min_cosine: f32,
    pub cosine_gap: f32,
    pub stage: usize,
    pub decided: f32,
    pub decided_gap: f32,
}

/// The best cosine similarity among the candidates (NaN: missing).
fn best(cosines: &[f32]) -> f32 {
    cosines.iter().copied().filter(|c| !c.is_nan()).fold(f32::NEG_INFINITY, f32::max)
}

impl Selective {
    /// Every candidate, one stage: what reranking was before it was selective.
    pub const ALL: Selective = Selective {
        max_pairs: usize::MAX,
        min_cosine: f32::NEG_INFINITY,
        cosine_gap: f32::INFINITY,
        stage: usize::MAX,
        decided: f32::INFINITY,
        decided_gap: f32::INFINITY,
    };

    /// Positions of the candidates that may be scored, in first-stage order.
    pub fn eligible(&self, cosines: &[f32]) -> Vec<usize> {
        let top = best(cosines);
        (0..cosines.len())
            .filter(|&i| cosines[i] >= self.min_cosine && top - cosines[i] <= self.cosine_gap)
            .take(self.max_pairs)
            .collect()
    }

    /// Scores candidates in stages with `score` (given positions, returns their scores in that order) and
    /// returns every candidate's score, `None` where it was not scored. `score` is called once per stage, never
    /// with an empty batch.
    pub fn run<E>(
        &self,
        cosines: &[f32],
        mut score: impl FnMut(&[usize]) -> Result<Vec<f32>, E>,
    ) -> Result<Vec<Option<f32>>, E> {
        let mut out = vec![None; cosines.len()];
        let top = best(cosines);
        let mut queue = self.eligible(cosines);
        let mut best = f32::NEG_INFINITY;
        let stage = self.stage.max(1);
        while !queue.is_empty() {
            if best >= self.decided {
                queue.retain(|&i| top - cosines[i] <= self.decided_gap);
                if queue.is_empty() {
                    break;
                }
            }
            let batch: Vec<usize> = queue.drain(..stage.min(queue.len())).collect();
            let scores = score(&batch)?;
            for (&i, s) in batch.iter().zip(scores) {
                out[i] = Some(s);
                if !s.is_nan() {
                    best = best.max(s);
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(max_pairs: usize, min_cosine: f32, cosine_gap: f32, stage: usize, decided: f32, gap: f32) -> Selective {
        Selective { max_pairs, min_cosine, cosine_gap, stage, decided, decided_gap: gap }
    }

    /// Runs `p` over precomputed scores; returns the result and the stages' batches.
    fn simulate(p: &Selective, cosines: &[f32], scores: &[f32]) -> (Vec<Option<f32>>, Vec<Vec<usize>>) {
        let mut stages = vec![];
        let out = p
            .run(cosines, |batch| {
                stages.push(batch.to_vec());
                Ok::<_, ()>(batch.iter().map(|&i| scores[i]).collect())
            })
            .unwrap();
        (out, stages)
    }

    #[test]
    fn all_scores_everything_in_one_stage() {
        let cos = [0.9, 0.5, 0.1];
        let (out, stages) = simulate(&Selective::ALL, &cos, &[1.0, 2.0, 3.0]);
        assert_eq!(out, vec![Some(1.0), Some(2.0), Some(3.0)]);
        assert_eq!(stages, vec![vec![0, 1, 2]]);
        let (out, stages) = simulate(&Selective::ALL, &[], &[]);
        assert!(out.is_empty() && stages.is_empty());
    }

    #[test]
    fn band_and_cap_bound_the_eligible_candidates() {
        let cos = [0.80, 0.78, 0.70, 0.60, 0.79];
        // Absolute band: 0.65 drops position 3; gap 0.05 from the top (0.80) drops position 2.
        assert_eq!(policy(10, 0.65, 1.0, 10, f32::INFINITY, 1.0).eligible(&cos), vec![0, 1, 2, 4]);
        assert_eq!(policy(10, 0.0, 0.05, 10, f32::INFINITY, 1.0).eligible(&cos), vec![0, 1, 4]);
        // The cap keeps the first in first-stage order, not the best cosines.
        assert_eq!(policy(2, 0.0, 1.0, 10, f32::INFINITY, 1.0).eligible(&cos), vec![0, 1]);
    }

    #[test]
    fn early_exit_once_a_candidate_is_decided() {
        let cos = [0.80, 0.79, 0.70, 0.69, 0.78];
        let p = policy(10, 0.0, 1.0, 2, 3.0, 0.05);
        // First stage 0,1; 0 scores 5 >= 3: only candidates within 0.05 of 0.80 continue (4), not 2, 3.
        let (out, stages) = simulate(&p, &cos, &[5.0, -1.0, 9.0, 9.0, 0.0]);
        assert_eq!(stages, vec![vec![0, 1], vec![4]]);
        assert_eq!(out, vec![Some(5.0), Some(-1.0), None, None, Some(0.0)]);
        // Nothing decided: every eligible candidate is scored, two at a time.
        let (_, stages) = simulate(&p, &cos, &[0.0; 5]);
        assert_eq!(stages, vec![vec![0, 1], vec![2, 3], vec![4]]);
    }

    #[test]
    fn a_failed_stage_stops_the_run() {
        let p = policy(10, 0.0, 1.0, 1, f32::INFINITY, 1.0);
        let mut calls = 0;
        let r = p.run(&[0.9, 0.8], |_| {
            calls += 1;
            Err::<Vec<f32>, _>("model failed")
        });
        assert_eq!(r, Err("model failed"));
        assert_eq!(calls, 1);
    }
}

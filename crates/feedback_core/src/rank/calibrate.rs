//! Calibration on golden questions: for each scorer (cross-encoder logits, cosine similarity) the floor,
//! relative cut and most notes that maximise a utility that charges for every irrelevant note injected
//! (`(lessons found - lambda x irrelevant notes injected) / questions`, see [`Summary::utility`]); per group
//! (task_type) when it has enough questions, and for all questions together (group `*`); whether reranking pays
//! off at all in a group; the cheapest selective-reranking bounds whose answers stay within `tolerance` of
//! reranking every candidate; and the near-tie margins within which score order carries no measurable
//! information.
//!
//! Input: every question's candidates in first-stage order, each with its cosine similarity and its full
//! cross-encoder score, and the question's graded judgments. Everything is simulated from those: no model runs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::metrics::{question, QuestionMetrics, Summary};
use super::select::Selective;
use super::{rank_cut, Cut, Scored};

#[derive(Debug, Clone, Deserialize)]
pub struct Candidate {
    pub id: i64,
    pub cosine: f32,
    /// Cross-encoder logit (None: not scored, never kept by the cross-encoder).
    pub score: Option<f32>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Question {
    pub group: String,
    /// (note id, grade) of the judged notes.
    #[serde(default)]
    pub graded: Vec<(i64, i16)>,
    /// First-stage order, best first.
    pub candidates: Vec<Candidate>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Options {
    /// Cost of one injected irrelevant note, in found lessons.
    pub lambda: f64,
    /// Most notes a caller asks for (fb_retrieve's final_k).
    pub k: usize,
    /// Calibrate groups with at least `min_questions` questions (and some answerable) on their own.
    pub per_group: bool,
    pub min_questions: usize,
    /// Selective reranking may lose at most this much recall@k and precision against reranking everything.
    pub tolerance: f64,
    /// Pairs per selective-reranking stage.
    pub stage: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scorer {
    CrossEncoder,
    Cosine,
}

/// A scorer's chosen cut and what it gives on the questions it was chosen on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Choice {
    pub floor: f32,
    /// None: no relative cut.
    pub relative_cut: Option<f32>,
    pub max_notes: usize,
    pub utility: f64,
    pub summary: Summary,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupChoice {
    /// A task_type, or `*` for all questions together.
    pub group: String,
    pub questions: usize,
    /// The cross-encoder's best utility beats the cosine's: rerank in this group.
    pub rerank: bool,
    pub cross_encoder: Choice,
    pub cosine: Choice,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SelectiveChoice {
    pub policy: Selective,
    pub mean_pairs: f64,
    pub p95_pairs: usize,
    pub full: Summary,
    pub selective: Summary,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calibration {
    pub options: Options,
    pub groups: Vec<GroupChoice>,
    /// None when no question is reranked.
    pub selective: Option<SelectiveChoice>,
    pub rerank_tie_margin: f32,
    pub cosine_tie_margin: f32,
}

fn score_of(c: &Candidate, scorer: Scorer) -> f32 {
    match scorer {
        Scorer::CrossEncoder => c.score.unwrap_or(f32::NAN),
        Scorer::Cosine => c.cosine,
    }
}

/// Ids returned for `q` when `scores` (one per candidate; NaN: not kept) are cut by `cut`; created_at is the
/// candidate's position, so near ties favour the later (lower-ranked) candidate: the adversarial order.
fn returned(q: &Question, scores: &[f32], cut: &Cut) -> Vec<i64> {
    let scored: Vec<Scored> =
        scores.iter().enumerate().map(|(i, &score)| Scored { score, created_at: i as i64 }).collect();
    rank_cut(&scored, cut).into_iter().map(|i| q.candidates[i].id).collect()
}

fn evaluate(qs: &[&Question], scorer: Scorer, cut: &Cut, k: usize) -> Vec<QuestionMetrics> {
    qs.iter()
        .map(|q| {
            let scores: Vec<f32> = q.candidates.iter().map(|c| score_of(c, scorer)).collect();
            question(&returned(q, &scores, cut), &q.graded, k)
        })
        .collect()
}

fn grid(scorer: Scorer) -> (Vec<f32>, Vec<Option<f32>>) {
    match scorer {
        Scorer::CrossEncoder => (
            (-48..=24).map(|i| i as f32 * 0.25).collect(),
            [0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0].into_iter().map(Some).chain([None]).collect(),
        ),
        Scorer::Cosine => (
            (30..=90).map(|i| i as f32 / 100.0).collect(),
            [0.01, 0.02, 0.03, 0.05, 0.08].into_iter().map(Some).chain([None]).collect(),
        ),
    }
}

fn cut(floor: f32, relative: Option<f32>, max_notes: usize) -> Cut {
    Cut { floor, relative: relative.unwrap_or(f32::INFINITY), margin: 0.0, limit: max_notes }
}

/// The cut of `scorer` with the best utility on `qs` (ties: higher recall, then fewer notes injected).
fn best_choice(qs: &[&Question], scorer: Scorer, o: &Options, check: &mut dyn FnMut()) -> Choice {
    let (floors, relatives) = grid(scorer);
    let mut best: Option<(Choice, f64, f64)> = None;
    for &floor in &floors {
        check();
        for &relative in &relatives {
            for max_notes in 1..=o.k.max(1) {
                let summary = Summary::of(&evaluate(qs, scorer, &cut(floor, relative, max_notes), o.k));
                let utility = summary.utility(o.lambda);
                let recall = summary.recall.unwrap_or(0.0);
                let notes = summary.mean_injected.unwrap_or(0.0);
                let better = match &best {
                    None => true,
                    Some((b, r, n)) => {
                        utility > b.utility + 1e-12
                            || ((utility - b.utility).abs() <= 1e-12
                                && (recall > *r + 1e-12 || (recall >= *r - 1e-12 && notes < *n)))
                    }
                };
                if better {
                    best = Some((Choice { floor, relative_cut: relative, max_notes, utility, summary }, recall, notes));
                }
            }
        }
    }
    best.expect("the grid is never empty").0
}

fn group_choice(group: &str, qs: &[&Question], o: &Options, check: &mut dyn FnMut()) -> GroupChoice {
    let cross_encoder = best_choice(qs, Scorer::CrossEncoder, o, check);
    let cosine = best_choice(qs, Scorer::Cosine, o, check);
    GroupChoice {
        group: group.to_string(),
        questions: qs.len(),
        rerank: cross_encoder.utility > cosine.utility,
        cross_encoder,
        cosine,
    }
}

fn percentile95(mut xs: Vec<usize>) -> usize {
    xs.sort_unstable();
    xs.get(((xs.len() as f64 * 0.95).ceil() as usize).saturating_sub(1)).copied().unwrap_or(0)
}

/// The cheapest selective policy (95th percentile of pairs per question, which bounds p95 latency, then the
/// mean) whose recall and precision stay within
/// `o.tolerance` of scoring every candidate, each question cut by its group's cross-encoder choice.
fn selective_choice(reranked: &[(&Question, Cut)], o: &Options, check: &mut dyn FnMut()) -> Option<SelectiveChoice> {
    if reranked.is_empty() {
        return None;
    }
    let run = |policy: &Selective| -> (Summary, Vec<usize>) {
        let mut pairs = Vec::with_capacity(reranked.len());
        let metrics: Vec<QuestionMetrics> = reranked
            .iter()
            .map(|(q, cut)| {
                let cosines: Vec<f32> = q.candidates.iter().map(|c| c.cosine).collect();
                let mut n = 0;
                let scores = policy
                    .run(&cosines, |batch| {
                        n += batch.len();
                        Ok::<_, ()>(batch.iter().map(|&i| score_of(&q.candidates[i], Scorer::CrossEncoder)).collect())
                    })
                    .unwrap_or_default();
                pairs.push(n);
                let scores: Vec<f32> = scores.into_iter().map(|s| s.unwrap_or(f32::NAN)).collect();
                question(&returned(q, &scores, cut), &q.graded, o.k)
            })
            .collect();
        (Summary::of(&metrics), pairs)
    };
    let (full, full_pairs) = run(&Selective::ALL);
    let within = |s: &Summary| {
        s.recall.unwrap_or(0.0) >= full.recall.unwrap_or(0.0) - o.tolerance - 1e-12
            && s.precision.unwrap_or(1.0) >= full.precision.unwrap_or(1.0) - o.tolerance - 1e-12
    };
    let mean = |p: &[usize]| p.iter().sum::<usize>() as f64 / p.len().max(1) as f64;
    let mut best = SelectiveChoice {
        policy: Selective::ALL,
        mean_pairs: mean(&full_pairs),
        p95_pairs: percentile95(full_pairs),
        full,
        selective: full,
    };
    let max_pairs = [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20];
    let min_cosines = [f32::NEG_INFINITY, 0.40, 0.45, 0.50, 0.52, 0.54, 0.56, 0.58, 0.60, 0.62];
    let gaps = [0.03, 0.05, 0.08, 0.10, 0.12, 0.15, 0.20, f32::INFINITY];
    let exits: Vec<(f32, f32)> = std::iter::once((f32::INFINITY, f32::INFINITY))
        .chain([-2.0, 0.0, 2.0, 4.0].into_iter().flat_map(|d| [0.01, 0.02, 0.04].into_iter().map(move |g| (d, g))))
        .collect();
    for &m in &max_pairs {
        for &min_cosine in &min_cosines {
            check();
            for &cosine_gap in &gaps {
                for &(decided, decided_gap) in &exits {
                    let policy =
                        Selective { max_pairs: m, min_cosine, cosine_gap, stage: o.stage, decided, decided_gap };
                    let (summary, pairs) = run(&policy);
                    let (mp, p95) = (mean(&pairs), percentile95(pairs));
                    let cheaper = p95 < best.p95_pairs || (p95 == best.p95_pairs && mp < best.mean_pairs - 1e-9);
                    if within(&summary) && cheaper {
                        best = SelectiveChoice { policy, mean_pairs: mp, p95_pairs: p95, full, selective: summary };
                    }
                }
            }
        }
    }
    Some(best)
}

/// The largest margin (from a small grid) within which ranking near ties adversarially (lower score first)
/// costs at most 0.005 of mean nDCG: below it, score differences carry no measurable information, and recency
/// may order the notes.
fn tie_margin(cut_questions: &[(&Question, Cut)], scorer: Scorer, o: &Options) -> f32 {
    let grid: &[f32] = match scorer {
        Scorer::CrossEncoder => &[0.0, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0],
        Scorer::Cosine => &[0.0, 0.005, 0.01, 0.02, 0.03, 0.05],
    };
    let ndcg = |margin: f32| {
        let metrics: Vec<QuestionMetrics> = cut_questions
            .iter()
            .map(|(q, cut)| {
                let scores: Vec<f32> = q.candidates.iter().map(|c| score_of(c, scorer)).collect();
                question(&returned(q, &scores, &Cut { margin, ..*cut }), &q.graded, o.k)
            })
            .collect();
        Summary::of(&metrics).ndcg.unwrap_or(0.0)
    };
    let base = ndcg(0.0);
    grid.iter().copied().filter(|&m| base - ndcg(m) <= 0.005 + 1e-12).fold(0.0, f32::max)
}

/// Calibrates on `questions` (see the module documentation); `check` is called now and then (the extension
/// checks for cancellation there).
pub fn calibrate(questions: &[Question], o: &Options, check: &mut dyn FnMut()) -> Calibration {
    let all: Vec<&Question> = questions.iter().collect();
    let mut groups = vec![group_choice("*", &all, o, check)];
    let mut by_group: BTreeMap<&str, Vec<&Question>> = BTreeMap::new();
    for q in questions {
        by_group.entry(&q.group).or_default().push(q);
    }
    if o.per_group {
        for (g, qs) in &by_group {
            let answerable = qs.iter().filter(|q| q.graded.iter().any(|&(_, grade)| grade >= 1)).count();
            if qs.len() >= o.min_questions.max(1) && answerable > 0 {
                groups.push(group_choice(g, qs, o, check));
            }
        }
    }
    let choice_of = |g: &str| groups.iter().find(|c| c.group == g).unwrap_or(&groups[0]);
    let with_cut = |scorer: Scorer, only_reranked: bool| -> Vec<(&Question, Cut)> {
        questions
            .iter()
            .filter_map(|q| {
                let c = choice_of(&q.group);
                if only_reranked && !c.rerank {
                    return None;
                }
                let ch = if scorer == Scorer::CrossEncoder { &c.cross_encoder } else { &c.cosine };
                Some((q, cut(ch.floor, ch.relative_cut, ch.max_notes)))
            })
            .collect()
    };
    let selective = selective_choice(&with_cut(Scorer::CrossEncoder, true), o, check);
    // A margin wider than the relative cut changes nothing (notes further apart are not both kept): report the
    // effective one.
    let effective = |m: f32, cut: Option<f32>| cut.map_or(m, |c| m.min(c));
    let rerank_tie_margin = effective(
        tie_margin(&with_cut(Scorer::CrossEncoder, false), Scorer::CrossEncoder, o),
        groups[0].cross_encoder.relative_cut,
    );
    let cosine_tie_margin =
        effective(tie_margin(&with_cut(Scorer::Cosine, false), Scorer::Cosine, o), groups[0].cosine.relative_cut);
    Calibration { options: *o, groups, selective, rerank_tie_margin, cosine_tie_margin }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> Options {
        Options { lambda: 0.5, k: 3, per_group: true, min_questions: 2, tolerance: 0.0, stage: 1 }
    }

    fn cand(id: i64, cosine: f32, score: f32) -> Candidate {
        Candidate { id, cosine, score: Some(score) }
    }

    /// Two groups: in "a" the cross-encoder separates the lesson (high logit) from noise; in "b" cosine does and
    /// the cross-encoder is noise. A question needing no note in each.
    fn golden() -> Vec<Question> {
        let q = |group: &str, graded: Vec<(i64, i16)>, candidates| Question { group: group.into(), graded, candidates };
        vec![
            q("a", vec![(1, 2)], vec![cand(2, 0.80, -3.0), cand(1, 0.78, 5.0), cand(3, 0.60, -8.0)]),
            q("a", vec![(4, 2)], vec![cand(5, 0.82, -2.0), cand(4, 0.79, 4.0), cand(6, 0.50, -9.0)]),
            q("a", vec![], vec![cand(7, 0.81, -4.0), cand(8, 0.70, -6.0)]),
            q("b", vec![(10, 2)], vec![cand(10, 0.90, -1.0), cand(11, 0.60, 3.0)]),
            q("b", vec![(12, 2)], vec![cand(12, 0.91, -2.0), cand(13, 0.55, 2.0)]),
            q("b", vec![], vec![cand(14, 0.50, 6.0)]),
        ]
    }

    #[test]
    fn each_group_gets_the_scorer_that_pays_off() {
        let c = calibrate(&golden(), &opts(), &mut || {});
        let g = |name: &str| c.groups.iter().find(|g| g.group == name).unwrap();
        assert!(g("a").rerank, "{:?}", g("a"));
        assert!(!g("b").rerank, "{:?}", g("b"));
        // In "a" the chosen cut returns exactly the lessons: recall 1, precision 1, the no-answer question empty.
        let s = g("a").cross_encoder.summary;
        assert_eq!((s.recall, s.precision, s.no_answer_correct), (Some(1.0), Some(1.0), Some(1.0)));
        let s = g("b").cosine.summary;
        assert_eq!((s.recall, s.precision, s.no_answer_correct), (Some(1.0), Some(1.0), Some(1.0)));
        assert_eq!(c.groups[0].group, "*");
        assert_eq!(c.groups.len(), 3);
    }

    #[test]
    fn selective_bounds_keep_the_answers_and_score_fewer_pairs() {
        let c = calibrate(&golden(), &opts(), &mut || {});
        let s = c.selective.expect("group a is reranked");
        assert_eq!(s.selective.recall, s.full.recall);
        assert!(s.mean_pairs < 8.0 / 3.0, "{s:?}");
    }

    #[test]
    fn small_groups_fall_back_to_all_questions() {
        let c = calibrate(&golden(), &Options { min_questions: 10, ..opts() }, &mut || {});
        assert_eq!(c.groups.len(), 1);
        let c = calibrate(&golden(), &Options { per_group: false, ..opts() }, &mut || {});
        assert_eq!(c.groups.len(), 1);
    }

    #[test]
    fn a_higher_lambda_never_injects_more() {
        let lo = calibrate(&golden(), &Options { lambda: 0.1, ..opts() }, &mut || {});
        let hi = calibrate(&golden(), &Options { lambda: 5.0, ..opts() }, &mut || {});
        let inj = |c: &Calibration| c.groups[0].cross_encoder.summary.irrelevant_per_question.unwrap();
        assert!(inj(&hi) <= inj(&lo));
    }
}

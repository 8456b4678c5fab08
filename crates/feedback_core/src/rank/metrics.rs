//! What a returned list of notes is worth against graded judgments. One definition, used by `fb_eval` (per
//! question, averaged in SQL) and by calibration (which simulates many settings on the same questions).
//!
//! Grades: 2 = the lesson for the question, 1 = helpful, 0 or absent = not relevant (injecting it misleads).
//! A question is answerable when some note has grade >= 1; its *top grade* is the highest grade it has.

use serde::Serialize;

/// One question's numbers.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct QuestionMetrics {
    pub answerable: bool,
    /// A note of the question's top grade is among the first `k` returned (answerable questions).
    pub hit: bool,
    /// 1 / position of the first note of the top grade (0 if none).
    pub reciprocal_rank: f64,
    /// Graded nDCG@k: gain 2^grade - 1, discount log2(position + 1), over the ideal order of the judged grades.
    pub ndcg: f64,
    /// Notes returned (all of them: every one goes into the prompt), and how many of them are judged >= 1.
    pub injected: usize,
    pub relevant: usize,
}

impl QuestionMetrics {
    /// Some returned note is judged irrelevant (for a question needing no note: anything returned).
    pub fn misled(&self) -> bool {
        self.relevant < self.injected
    }
}

fn grade_of(graded: &[(i64, i16)], id: i64) -> i16 {
    graded.iter().filter(|(g, _)| *g == id).map(|&(_, grade)| grade).max().unwrap_or(0).max(0)
}

fn gain(grade: i16) -> f64 {
    (2f64.powi(grade as i32) - 1.0).max(0.0)
}

/// The numbers of `returned` (note ids, best first) for a question whose judged notes are `graded`
/// (id, grade): recall, MRR and nDCG over the first `k`, injected and relevant over all of them.
pub fn question(returned: &[i64], graded: &[(i64, i16)], k: usize) -> QuestionMetrics {
    let top = graded.iter().map(|&(_, g)| g).max().unwrap_or(0);
    let grades: Vec<i16> = returned.iter().map(|&id| grade_of(graded, id)).collect();
    let shown = &grades[..grades.len().min(k)];
    let first_top = shown.iter().position(|&g| top >= 1 && g == top);
    let dcg: f64 = shown.iter().enumerate().map(|(i, &g)| gain(g) / (i as f64 + 2.0).log2()).sum();
    let mut ideal: Vec<i16> = graded.iter().map(|&(_, g)| g).filter(|&g| g > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal.iter().take(k).enumerate().map(|(i, &g)| gain(g) / (i as f64 + 2.0).log2()).sum();
    QuestionMetrics {
        answerable: top >= 1,
        hit: first_top.is_some(),
        reciprocal_rank: first_top.map_or(0.0, |p| 1.0 / (p as f64 + 1.0)),
        ndcg: if idcg > 0.0 { dcg / idcg } else { 0.0 },
        injected: returned.len(),
        relevant: grades.iter().filter(|&&g| g >= 1).count(),
    }
}

/// Averages over a set of questions. `None` where the average is over nothing.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Summary {
    pub questions: usize,
    pub answerable: usize,
    /// Over answerable questions: recall@k, MRR, graded nDCG@k, share whose injected notes include one judged
    /// irrelevant, mean notes injected.
    pub recall: Option<f64>,
    pub mrr: Option<f64>,
    pub ndcg: Option<f64>,
    pub misled_share: Option<f64>,
    pub mean_injected: Option<f64>,
    /// Over all questions: the share of injected notes judged >= 1 (None when nothing was injected).
    pub precision: Option<f64>,
    /// Over questions needing no note: the share that got none.
    pub no_answer_correct: Option<f64>,
    /// Over all questions: notes judged irrelevant injected per question.
    pub irrelevant_per_question: Option<f64>,
}

impl Summary {
    pub fn of<'a>(items: impl IntoIterator<Item = &'a QuestionMetrics>) -> Summary {
        let (mut n, mut ans, mut hits, mut rr, mut ndcg, mut misled, mut inj_ans) = (0, 0, 0, 0.0, 0.0, 0, 0);
        let (mut inj, mut rel, mut none, mut none_ok) = (0, 0, 0, 0);
        for m in items {
            n += 1;
            inj += m.injected;
            rel += m.relevant;
            if m.answerable {
                ans += 1;
                hits += m.hit as usize;
                rr += m.reciprocal_rank;
                ndcg += m.ndcg;
                misled += m.misled() as usize;
                inj_ans += m.injected;
            } else {
                none += 1;
                none_ok += (m.injected == 0) as usize;
            }
        }
        let avg = |x: f64, d: usize| (d > 0).then(|| x / d as f64);
        Summary {
            questions: n,
            answerable: ans,
            recall: avg(hits as f64, ans),
            mrr: avg(rr, ans),
            ndcg: avg(ndcg, ans),
            misled_share: avg(misled as f64, ans),
            mean_injected: avg(inj_ans as f64, ans),
            precision: avg(rel as f64, inj),
            no_answer_correct: avg(none_ok as f64, none),
            irrelevant_per_question: avg((inj - rel) as f64, n),
        }
    }

    /// (lessons found - lambda x irrelevant notes injected) / questions: hits are counted per question so that both
    /// terms share one denominator: a found lesson is worth 1, an injected irrelevant note costs `lambda`.
    pub fn utility(&self, lambda: f64) -> f64 {
        if self.questions == 0 {
            return 0.0;
        }
        let hits = self.recall.unwrap_or(0.0) * self.answerable as f64;
        (hits - lambda * self.irrelevant_per_question.unwrap_or(0.0) * self.questions as f64) / self.questions as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lesson_first_is_a_perfect_answer() {
        let m = question(&[7], &[(7, 2)], 3);
        assert!(m.answerable && m.hit && !m.misled());
        assert_eq!((m.reciprocal_rank, m.ndcg, m.injected, m.relevant), (1.0, 1.0, 1, 1));
    }

    #[test]
    fn an_extra_irrelevant_note_misleads_but_keeps_recall() {
        let m = question(&[7, 9], &[(7, 2)], 3);
        assert!(m.hit && m.misled());
        assert_eq!((m.injected, m.relevant), (2, 1));
        // Second place: reciprocal rank 1/2, nDCG 1/log2(3).
        let m = question(&[9, 7], &[(7, 2)], 3);
        assert_eq!(m.reciprocal_rank, 0.5);
        assert!((m.ndcg - 1.0 / 3f64.log2()).abs() < 1e-12);
        // Beyond k it is not a hit, but it was injected all the same.
        let m = question(&[1, 2, 7], &[(7, 2)], 2);
        assert!(!m.hit && m.injected == 3 && m.relevant == 1);
    }

    #[test]
    fn graded_gain_rewards_the_lesson_over_a_helpful_note() {
        let graded = [(1, 2), (2, 1)];
        let best = question(&[1, 2], &graded, 3);
        let swapped = question(&[2, 1], &graded, 3);
        assert!((best.ndcg - 1.0).abs() < 1e-12);
        assert!(swapped.ndcg < best.ndcg && swapped.hit);
        // A helpful note alone is relevant but not a hit: the top grade is 2.
        let helpful = question(&[2], &graded, 3);
        assert!(!helpful.hit && !helpful.misled() && helpful.relevant == 1);
    }

    #[test]
    fn questions_needing_no_note() {
        let empty = question(&[], &[], 3);
        assert!(!empty.answerable && !empty.misled());
        let wrong = question(&[4], &[(4, 0)], 3);
        assert!(!wrong.answerable && wrong.misled());
        let s = Summary::of(&[empty, wrong, question(&[7, 9], &[(7, 2)], 3)]);
        assert_eq!(s.questions, 3);
        assert_eq!(s.answerable, 1);
        assert_eq!(s.no_answer_correct, Some(0.5));
        assert_eq!(s.recall, Some(1.0));
        assert_eq!(s.precision, Some(1.0 / 3.0));
        assert_eq!(s.mean_injected, Some(2.0));
        assert_eq!(s.misled_share, Some(1.0));
        assert_eq!(s.irrelevant_per_question, Some(2.0 / 3.0));
        // One hit over 3 questions, 2 irrelevant notes at lambda 0.5: (1 - 1) / 3.
        assert!((s.utility(0.5)).abs() < 1e-12);
        assert_eq!(Summary::of(&[]).recall, None);
    }
}

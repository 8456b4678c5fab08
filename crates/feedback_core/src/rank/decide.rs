//! The learned final decision: per (input, candidate note) features give a probability that the note applies;
//! every note at or above the threshold goes in. Logistic regression fitted by Newton's method with an L2
//! penalty on standardised features: pure Rust, deterministic (same rows, same weights), no runtime.
//!
//! Features ([`FEATURES`]), from what the first stage already computed plus the segment vectors:
//! the cosine of the whole input, of its best segment, their gaps to the best candidate's, the first-stage rank,
//! the lexical share and weight of the note's words in the input ([`super::code::lexical`]), and the input's
//! length in segments.

use serde::{Deserialize, Serialize};

/// What the first stage and the segment vectors give for one candidate.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
pub struct Raw {
    /// Cosine of the whole input and the note.
    pub cosine: f32,
    /// Best cosine of any segment and the note (the whole input's when there are no segments).
    pub segment: f32,
    /// Share of the note's idf-weighted words found in the input.
    pub lexical_share: f32,
    /// Their weight.
    pub lexical_weight: f32,
    /// Whether the note carries the reviewed input that led to it (its context).
    pub has_context: bool,
    /// Share of the context's idf-weighted words found in the input (0 without a context).
    pub context_share: f32,
    /// Their weight.
    pub context_weight: f32,
}

pub const FEATURES: [&str; 14] = [
    "cosine",
    "segment_cosine",
    "cosine_gap",
    "segment_gap",
    "rank",
    "lexical_share",
    "lexical_weight",
    "lexical_gap",
    "segments",
    "segment_x_lexical",
    "has_context",
    "context_share",
    "context_weight",
    "context_gap",
];

/// Features of every candidate of one input, in candidate order (first-stage order: rank = position).
pub fn featurize(raw: &[Raw], n_segments: usize) -> Vec<Vec<f64>> {
    let best = |f: fn(&Raw) -> f32| raw.iter().map(f).fold(f32::NEG_INFINITY, f32::max);
    let (bc, bs, bl, bx) =
        (best(|r| r.cosine), best(|r| r.segment), best(|r| r.lexical_share), best(|r| r.context_share));
    raw.iter()
        .enumerate()
        .map(|(i, r)| {
            vec![
                r.cosine as f64,
                r.segment as f64,
                (r.cosine - bc) as f64,
                (r.segment - bs) as f64,
                (1.0 + i as f64).ln(),
                r.lexical_share as f64,
                (1.0 + r.lexical_weight as f64).ln(),
                (r.lexical_share - bl) as f64,
                (1.0 + n_segments as f64).ln(),
                r.segment as f64 * r.lexical_share as f64,
                r.has_context as u8 as f64,
                r.context_share as f64,
                (1.0 + r.context_weight as f64).ln(),
                (r.context_share - bx) as f64,
            ]
        })
        .collect()
}

/// [`Raw`] evidence of each candidate: its cosines (a segment never scores below the whole input), the lexical
/// evidence of its text (`docs`: lesson, correction, wrong answer) and of its context (the reviewed input that led
/// to the note; blank: none) in the input.
pub fn raw_features(input: &str, docs: &[&str], contexts: &[&str], cosines: &[f32], segments: &[f32]) -> Vec<Raw> {
    let lex = super::code::lexical(input, docs);
    let ctx = super::code::lexical(input, contexts);
    (0..docs.len())
        .map(|i| {
            let has_context = contexts.get(i).is_some_and(|c| !c.trim().is_empty());
            let (cs, cw) = if has_context { ctx[i] } else { (0.0, 0.0) };
            Raw {
                cosine: cosines[i],
                segment: segments[i].max(cosines[i]),
                lexical_share: lex[i].0,
                lexical_weight: lex[i].1,
                has_context,
                context_share: cs,
                context_weight: cw,
            }
        })
        .collect()
}

/// A fitted decision: standardisation, weights, bias and the threshold a note's probability must reach.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub features: Vec<String>,
    pub mean: Vec<f64>,
    pub scale: Vec<f64>,
    pub weights: Vec<f64>,
    pub bias: f64,
    /// The probability a note without a context must reach.
    pub threshold: f64,
    /// The probability a note with a context must reach (its evidence is stronger, so is the bar); None: fitted
    /// without contexts, `threshold` for every note.
    #[serde(default)]
    pub threshold_context: Option<f64>,
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

impl Decision {
    /// Probability that each candidate applies.
    pub fn predict(&self, rows: &[Vec<f64>]) -> Vec<f64> {
        rows.iter()
            .map(|x| {
                let z: f64 = x
                    .iter()
                    .zip(&self.mean)
                    .zip(&self.scale)
                    .zip(&self.weights)
                    .map(|(((v, m), s), w)| w * (v - m) / s)
                    .sum();
                sigmoid(z + self.bias)
            })
            .collect()
    }

    /// Whether this decision reads the features this build computes.
    pub fn fits_this_build(&self) -> bool {
        self.features.iter().map(String::as_str).eq(FEATURES.iter().copied())
            && self.mean.len() == FEATURES.len()
            && self.scale.len() == FEATURES.len()
            && self.weights.len() == FEATURES.len()
    }
}

#[allow(clippy::needless_range_loop)] // numeric code reads clearer with indices
/// Solves `a x = b` (a symmetric positive definite, small) by Gaussian elimination with partial pivoting.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let n = b.len();
    for c in 0..n {
        let p = (c..n).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs())).unwrap_or(c);
        a.swap(c, p);
        b.swap(c, p);
        let d = if a[c][c].abs() < 1e-12 { 1e-12 } else { a[c][c] };
        for r in c + 1..n {
            let f = a[r][c] / d;
            for k in c..n {
                a[r][k] -= f * a[c][k];
            }
            b[r] -= f * b[c];
        }
    }
    let mut x = vec![0.0; n];
    for r in (0..n).rev() {
        let s: f64 = (r + 1..n).map(|k| a[r][k] * x[k]).sum();
        let d = if a[r][r].abs() < 1e-12 { 1e-12 } else { a[r][r] };
        x[r] = (b[r] - s) / d;
    }
    x
}

/// Fits weights and bias (threshold 0.5 until [`choose_threshold`]); `positive_weight` weighs each positive row
/// (positives are rare: one or two of twenty candidates), `l2` the penalty on the standardised weights.
pub fn fit(rows: &[Vec<f64>], labels: &[bool], positive_weight: f64, l2: f64) -> Decision {
    fit_named(&FEATURES, rows, labels, positive_weight, l2)
}

/// [`fit`] over any named features (each row holds one value per name, in order): also used by the
/// near-duplicate comparison ([`crate::dedup`]).
pub fn fit_named(names: &[&str], rows: &[Vec<f64>], labels: &[bool], positive_weight: f64, l2: f64) -> Decision {
    let d = names.len();
    let n = rows.len().max(1) as f64;
    let mean: Vec<f64> = (0..d).map(|j| rows.iter().map(|r| r[j]).sum::<f64>() / n).collect();
    let scale: Vec<f64> = (0..d)
        .map(|j| {
            let v = rows.iter().map(|r| (r[j] - mean[j]).powi(2)).sum::<f64>() / n;
            if v.sqrt() > 1e-9 {
                v.sqrt()
            } else {
                1.0
            }
        })
        .collect();
    let z: Vec<Vec<f64>> = rows
        .iter()
        .map(|r| {
            let mut v: Vec<f64> = (0..d).map(|j| (r[j] - mean[j]) / scale[j]).collect();
            v.push(1.0);
            v
        })
        .collect();
    let mut w = vec![0.0; d + 1];
    for _ in 0..30 {
        let mut grad = vec![0.0; d + 1];
        let mut hess = vec![vec![0.0; d + 1]; d + 1];
        for (x, &y) in z.iter().zip(labels) {
            let p = sigmoid(x.iter().zip(&w).map(|(a, b)| a * b).sum());
            let c = if y { positive_weight } else { 1.0 };
            let t = if y { 1.0 } else { 0.0 };
            for i in 0..=d {
                grad[i] += c * (p - t) * x[i];
                for k in 0..=d {
                    hess[i][k] += c * p * (1.0 - p) * x[i] * x[k];
                }
            }
        }
        for i in 0..d {
            grad[i] += l2 * w[i];
            hess[i][i] += l2;
        }
        hess[d][d] += 1e-9;
        let step = solve(hess, grad);
        let mut moved = 0.0f64;
        for i in 0..=d {
            w[i] -= step[i];
            moved = moved.max(step[i].abs());
        }
        if moved < 1e-9 {
            break;
        }
    }
    Decision {
        features: names.iter().map(|s| s.to_string()).collect(),
        mean,
        scale,
        bias: w[d],
        weights: w[..d].to_vec(),
        threshold: 0.5,
        threshold_context: None,
    }
}

/// One input's candidates: their probabilities and whether each applies (grade 2); `applicable` counts every
/// applicable note, found among the candidates or not.
#[derive(Debug, Clone)]
pub struct Judged {
    pub probs: Vec<f64>,
    pub applies: Vec<bool>,
    pub applicable: usize,
}

/// What injecting every candidate at or above `threshold` (at most `limit` per input) gives.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Outcome {
    pub threshold: f64,
    /// Share of applicable notes injected.
    pub recall: f64,
    /// Share of injected notes that apply.
    pub precision: f64,
    /// Share of inputs with no applicable note left empty.
    pub clean_empty: f64,
}

pub fn outcome(inputs: &[Judged], threshold: f64, limit: usize) -> Outcome {
    let (mut found, mut applicable, mut injected, mut clean, mut clean_empty) =
        (0usize, 0usize, 0usize, 0usize, 0usize);
    for q in inputs {
        let mut order: Vec<usize> = (0..q.probs.len()).filter(|&i| q.probs[i] >= threshold).collect();
        order.sort_by(|&a, &b| q.probs[b].total_cmp(&q.probs[a]).then(a.cmp(&b)));
        order.truncate(limit);
        found += order.iter().filter(|&&i| q.applies[i]).count();
        injected += order.len();
        applicable += q.applicable;
        if q.applicable == 0 {
            clean += 1;
            clean_empty += order.is_empty() as usize;
        }
    }
    let ratio = |a: usize, b: usize, empty: f64| if b == 0 { empty } else { a as f64 / b as f64 };
    Outcome {
        threshold,
        recall: ratio(found, applicable, 1.0),
        precision: ratio(found, injected, 1.0),
        clean_empty: ratio(clean_empty, clean, 1.0),
    }
}

/// The threshold that maximises the worst of recall, precision and clean inputs left empty (ties: the higher
/// threshold, fewer notes injected), among the distinct probabilities seen.
pub fn choose_threshold(inputs: &[Judged], limit: usize) -> Outcome {
    let mut cands: Vec<f64> = inputs.iter().flat_map(|q| q.probs.iter().copied()).collect();
    cands.sort_by(f64::total_cmp);
    cands.dedup();
    let score = |o: &Outcome| o.recall.min(o.precision).min(o.clean_empty);
    let mut best = outcome(inputs, 1.0 + f64::EPSILON, limit);
    for t in cands {
        let o = outcome(inputs, t, limit);
        if score(&o) >= score(&best) {
            best = o;
        }
    }
    best
}

/// One golden input's first-stage candidates, for fitting.
#[derive(Debug, Clone, Deserialize)]
pub struct FitCandidate {
    pub id: i64,
    pub doc: String,
    #[serde(default)]
    pub context: String,
    pub cosine: f32,
    pub segment: f32,
}

/// One golden input: the query, how many segments it was cut into, its graded notes, its candidates.
#[derive(Debug, Clone, Deserialize)]
pub struct FitInput {
    pub query: String,
    pub n_segments: usize,
    #[serde(default)]
    pub graded: Vec<(i64, i16)>,
    pub candidates: Vec<FitCandidate>,
}

/// Fits the decision on golden inputs: logistic regression on every candidate (grade 2: applies; positives
/// weighted by the square root of the class ratio), then [`choose_threshold`] with at most `limit` notes per
/// input. When some notes carry a context, every input is also fitted with the contexts left out, so that the
/// decision also holds for notes without one, and each pass gets its own threshold; the outcome returned is the
/// pass with contexts (when there is one). None when no candidate applies. `interrupt` runs once per input.
pub fn fit_inputs(inputs: &[FitInput], limit: usize, interrupt: &mut dyn FnMut()) -> Option<(Decision, Outcome)> {
    let (mut rows, mut labels, mut per_input) = (Vec::new(), Vec::new(), Vec::new());
    let any_context = inputs.iter().flat_map(|q| &q.candidates).any(|c| !c.context.trim().is_empty());
    let passes: &[bool] = if any_context { &[true, false] } else { &[false] };
    for (q, &with_context) in inputs.iter().flat_map(|q| passes.iter().map(move |p| (q, p))) {
        interrupt();
        let docs: Vec<&str> = q.candidates.iter().map(|c| c.doc.as_str()).collect();
        let ctx: Vec<&str> = q.candidates.iter().map(|c| if with_context { c.context.as_str() } else { "" }).collect();
        let c: Vec<f32> = q.candidates.iter().map(|c| c.cosine).collect();
        let s: Vec<f32> = q.candidates.iter().map(|c| c.segment).collect();
        let f = featurize(&raw_features(&q.query, &docs, &ctx, &c, &s), q.n_segments);
        let applies: Vec<bool> =
            q.candidates.iter().map(|c| q.graded.iter().any(|&(id, g)| id == c.id && g >= 2)).collect();
        labels.extend(applies.iter().copied());
        per_input.push((with_context, f.clone(), applies, q.graded.iter().filter(|g| g.1 >= 2).count()));
        rows.extend(f);
    }
    let positives = labels.iter().filter(|&&y| y).count();
    if positives == 0 {
        return None;
    }
    let weight = ((labels.len() - positives) as f64 / positives as f64).sqrt().max(1.0);
    let mut d = fit(&rows, &labels, weight, 1.0);
    // One threshold per pass: with the notes' contexts, and without.
    let judged = |with: bool| -> Vec<Judged> {
        per_input
            .iter()
            .filter(|p| p.0 == with)
            .map(|(_, f, applies, applicable)| Judged {
                probs: d.predict(f),
                applies: applies.clone(),
                applicable: *applicable,
            })
            .collect()
    };
    let plain = choose_threshold(&judged(false), limit);
    let context = any_context.then(|| choose_threshold(&judged(true), limit));
    d.threshold = plain.threshold;
    d.threshold_context = context.map(|o| o.threshold);
    Some((d, context.unwrap_or(plain)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(c: f32, s: f32, l: f32) -> Raw {
        Raw {
            cosine: c,
            segment: s,
            lexical_share: l,
            lexical_weight: l * 10.0,
            has_context: false,
            context_share: 0.0,
            context_weight: 0.0,
        }
    }

    #[test]
    fn features_are_relative_to_the_best_candidate() {
        let f = featurize(&[raw(0.8, 0.9, 0.5), raw(0.7, 0.6, 0.1)], 3);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].len(), FEATURES.len());
        assert!(f[0][2].abs() < 1e-6 && (f[1][2] + 0.1).abs() < 1e-6);
        assert!((f[1][4] - 2f64.ln()).abs() < 1e-9);
    }

    #[test]
    fn fit_separates_and_is_deterministic() {
        // Applicable notes: high segment cosine and lexical share.
        let mut rows = Vec::new();
        let mut labels = Vec::new();
        for i in 0..200 {
            let y = i % 10 == 0;
            let jitter = (i as f32 * 0.37).sin() * 0.05;
            let r = if y { raw(0.75 + jitter, 0.85 + jitter, 0.4) } else { raw(0.72 + jitter, 0.7 + jitter, 0.05) };
            rows.extend(featurize(&[r], 4));
            labels.push(y);
        }
        let d = fit(&rows, &labels, 3.0, 1.0);
        assert_eq!(d, fit(&rows, &labels, 3.0, 1.0));
        assert!(d.fits_this_build());
        let p = d.predict(&rows);
        let pos = p.iter().zip(&labels).filter(|(_, &y)| y).map(|(p, _)| *p).fold(1.0, f64::min);
        let neg = p.iter().zip(&labels).filter(|(_, &y)| !y).map(|(p, _)| *p).fold(0.0, f64::max);
        assert!(pos > neg, "every positive above every negative: {pos} vs {neg}");
    }

    #[test]
    fn threshold_balances_recall_precision_and_empty_answers() {
        let inputs = vec![
            Judged { probs: vec![0.9, 0.4], applies: vec![true, false], applicable: 1 },
            Judged { probs: vec![0.3, 0.2], applies: vec![false, false], applicable: 0 },
            Judged { probs: vec![0.6, 0.5], applies: vec![true, true], applicable: 2 },
        ];
        let o = choose_threshold(&inputs, 5);
        assert_eq!((o.recall, o.precision, o.clean_empty), (1.0, 1.0, 1.0));
        assert!(o.threshold > 0.4 && o.threshold <= 0.5);
        let none = outcome(&inputs, 2.0, 5);
        assert_eq!((none.recall, none.precision, none.clean_empty), (0.0, 1.0, 1.0));
    }
}

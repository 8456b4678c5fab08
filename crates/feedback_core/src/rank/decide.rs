//! The learned final decision: per (input, candidate note) features give a probability that the note applies;
//! every note at or above the threshold goes in. Logistic regression fitted by Newton's method with an L2
//! penalty on standardised features: pure Rust, deterministic (same rows, same weights), no runtime.
//!
//! Features ([`FEATURES`]), from what the first stage already computed plus the segment vectors:
//! the cosine of the whole input, of its best segment, their gaps to the best candidate's, the first-stage rank,
//! the lexical share and weight of the note's words in the input ([`super::code::lexical`]), and the input's
//! length in segments.
//!
//! A decision may also carry a [`Gate`]: logistic regression on the input's own vector (its embedding, as a
//! query) that gives the probability that any note applies to the input at all. A note's probability is then its
//! candidate probability times the gate's. The candidate features rank the notes of one input well but cannot
//! tell clean code from the faulty code it resembles; the input's vector, fitted on graded inputs, can a little.

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
    /// Whether the input needs a note at all, from its own vector; None: every input passes (fitted without
    /// the inputs' vectors, every decision before 0.12.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<Gate>,
}

/// Logistic regression on an input's vector: the probability that some note applies to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    pub mean: Vec<f64>,
    pub scale: Vec<f64>,
    pub weights: Vec<f64>,
    pub bias: f64,
}

/// L2 penalty of the gate's standardised weights (one per dimension of the vector: many against a few hundred
/// graded inputs).
const GATE_L2: f64 = 10.0;

/// Folds of the cross-fitting that gives each tune input a gate probability from a gate fitted without it.
const GATE_FOLDS: usize = 5;

impl Gate {
    /// Fitted on input vectors (all of one length) and whether some note applies to each; None without vectors.
    pub fn fit(vectors: &[&[f32]], any_applies: &[bool]) -> Option<Gate> {
        let dims = vectors.first()?.len();
        if dims == 0 || vectors.iter().any(|v| v.len() != dims) {
            return None;
        }
        let names: Vec<String> = (0..dims).map(|i| format!("v{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let rows: Vec<Vec<f64>> = vectors.iter().map(|v| v.iter().map(|&x| x as f64).collect()).collect();
        let d = fit_named(&names, &rows, any_applies, 1.0, GATE_L2);
        Some(Gate { mean: d.mean, scale: d.scale, weights: d.weights, bias: d.bias })
    }

    /// The probability that some note applies to the input of this vector; None when its length is not the
    /// gate's (a vector of another model).
    pub fn predict(&self, vector: &[f32]) -> Option<f64> {
        (vector.len() == self.weights.len())
            .then(|| probability(vector.iter().map(|&v| v as f64), &self.mean, &self.scale, &self.weights, self.bias))
    }
}

/// Logistic regression's probability for one row of features: standardised, weighted, plus the bias.
fn probability(x: impl Iterator<Item = f64>, mean: &[f64], scale: &[f64], weights: &[f64], bias: f64) -> f64 {
    let z: f64 = x.zip(mean).zip(scale).zip(weights).map(|(((v, m), s), w)| w * (v - m) / s).sum();
    sigmoid(z + bias)
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

impl Decision {
    /// Probability that each candidate applies.
    pub fn predict(&self, rows: &[Vec<f64>]) -> Vec<f64> {
        rows.iter().map(|x| probability(x.iter().copied(), &self.mean, &self.scale, &self.weights, self.bias)).collect()
    }

    /// Probability that each candidate applies to the input of `vector`: [`Self::predict`] times the gate's
    /// probability for the input. None when the decision has a gate and `vector` is not of its length.
    pub fn score(&self, rows: &[Vec<f64>], vector: &[f32]) -> Option<Vec<f64>> {
        let gate = match &self.gate {
            Some(g) => g.predict(vector)?,
            None => 1.0,
        };
        Some(self.predict(rows).into_iter().map(|p| p * gate).collect())
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
        gate: None,
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

/// One golden input: the query, its vector (as fb_retrieve embeds it; empty: not given), how many segments it was
/// cut into, its graded notes, its candidates.
#[derive(Debug, Clone, Deserialize)]
pub struct FitInput {
    pub query: String,
    #[serde(default)]
    pub vector: Vec<f32>,
    pub n_segments: usize,
    #[serde(default)]
    pub graded: Vec<(i64, i16)>,
    pub candidates: Vec<FitCandidate>,
}

/// Fits the decision on golden inputs: logistic regression on every candidate (grade 2: applies; positives
/// weighted by the square root of the class ratio), and, when every input carries its vector, a [`Gate`] on
/// those vectors; then [`choose_threshold`] with at most `limit` notes per input, on each candidate's probability
/// times its input's gate probability from a gate fitted without that input (cross-fitted in [`GATE_FOLDS`]
/// interleaved folds: a gate scores the inputs it was fitted on too well to choose a threshold by). When some
/// notes carry a context, every input is also fitted with the contexts left out, so that the decision also holds
/// for notes without one, and each pass gets its own threshold; the outcome returned is the pass with contexts
/// (when there is one). None when no candidate applies. `interrupt` runs once per input and per gate fit.
pub fn fit_inputs(inputs: &[FitInput], limit: usize, interrupt: &mut dyn FnMut()) -> Option<(Decision, Outcome)> {
    let (mut rows, mut labels, mut per_input) = (Vec::new(), Vec::new(), Vec::new());
    let any_context = inputs.iter().flat_map(|q| &q.candidates).any(|c| !c.context.trim().is_empty());
    let passes: &[bool] = if any_context { &[true, false] } else { &[false] };
    for ((n, q), &with_context) in inputs.iter().enumerate().flat_map(|q| passes.iter().map(move |p| (q, p))) {
        interrupt();
        let docs: Vec<&str> = q.candidates.iter().map(|c| c.doc.as_str()).collect();
        let ctx: Vec<&str> = q.candidates.iter().map(|c| if with_context { c.context.as_str() } else { "" }).collect();
        let c: Vec<f32> = q.candidates.iter().map(|c| c.cosine).collect();
        let s: Vec<f32> = q.candidates.iter().map(|c| c.segment).collect();
        let f = featurize(&raw_features(&q.query, &docs, &ctx, &c, &s), q.n_segments);
        let applies: Vec<bool> =
            q.candidates.iter().map(|c| q.graded.iter().any(|&(id, g)| id == c.id && g >= 2)).collect();
        labels.extend(applies.iter().copied());
        per_input.push((n, with_context, f.clone(), applies, q.graded.iter().filter(|g| g.1 >= 2).count()));
        rows.extend(f);
    }
    let positives = labels.iter().filter(|&&y| y).count();
    if positives == 0 {
        return None;
    }
    let weight = ((labels.len() - positives) as f64 / positives as f64).sqrt().max(1.0);
    let mut d = fit(&rows, &labels, weight, 1.0);
    // The gate, and each input's probability from a gate fitted on the other folds (1: no gate).
    let vectors: Vec<&[f32]> = inputs.iter().map(|q| q.vector.as_slice()).collect();
    let any_applies: Vec<bool> = inputs.iter().map(|q| q.graded.iter().any(|g| g.1 >= 2)).collect();
    let mut gated = vec![1.0; inputs.len()];
    d.gate = Gate::fit(&vectors, &any_applies);
    if d.gate.is_some() && any_applies.iter().any(|&a| a) && any_applies.iter().any(|&a| !a) {
        for fold in 0..GATE_FOLDS.min(inputs.len()) {
            interrupt();
            let (mut v, mut y) = (Vec::new(), Vec::new());
            for i in (0..inputs.len()).filter(|i| i % GATE_FOLDS != fold) {
                v.push(vectors[i]);
                y.push(any_applies[i]);
            }
            if let Some(g) = Gate::fit(&v, &y) {
                for i in (0..inputs.len()).filter(|i| i % GATE_FOLDS == fold) {
                    gated[i] = g.predict(vectors[i]).unwrap_or(1.0);
                }
            }
        }
    } else {
        // Every input needs a note, or none does: the vectors cannot tell them apart.
        d.gate = None;
    }
    // One threshold per pass: with the notes' contexts, and without.
    let judged = |with: bool| -> Vec<Judged> {
        per_input
            .iter()
            .filter(|p| p.1 == with)
            .map(|(n, _, f, applies, applicable)| Judged {
                probs: d.predict(f).into_iter().map(|p| p * gated[*n]).collect(),
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

    fn input(n: usize, faulty: bool) -> FitInput {
        // Faulty inputs lean one way on the first of four dimensions, clean ones the other; candidate 1 applies
        // to faulty inputs and looks the same in both.
        let lean = if faulty { 1.0 } else { -1.0 };
        let wobble = (n as f32 * 0.71).sin();
        FitInput {
            query: format!("SELECT * FROM t WHERE id = {n}\nreturn rows"),
            vector: vec![0.3 * lean + 0.2 * wobble, wobble, 0.5, -(n as f32 * 0.13).cos()],
            n_segments: 0,
            graded: if faulty { vec![(1, 2)] } else { vec![] },
            candidates: vec![
                FitCandidate { id: 1, doc: "bind ids".into(), context: String::new(), cosine: 0.8, segment: 0.8 },
                FitCandidate { id: 2, doc: "close files".into(), context: String::new(), cosine: 0.6, segment: 0.6 },
            ],
        }
    }

    #[test]
    fn the_gate_leaves_clean_inputs_empty_when_their_vectors_differ() {
        let inputs: Vec<FitInput> = (0..60).map(|n| input(n, n % 3 != 0)).collect();
        let (d, o) = fit_inputs(&inputs, 3, &mut || {}).expect("a decision");
        assert_eq!(d, fit_inputs(&inputs, 3, &mut || {}).unwrap().0, "deterministic");
        let gate = d.gate.as_ref().expect("fitted with the inputs' vectors");
        assert_eq!(gate.weights.len(), 4);
        assert!(o.clean_empty > 0.9 && o.recall > 0.9, "{o:?}");
        // A decision with a gate needs the input's vector, of its length.
        let rows = featurize(&raw_features("x", &["bind ids"], &[""], &[0.8], &[0.8]), 0);
        assert!(d.score(&rows, &[0.0; 3]).is_none());
        let faulty = d.score(&rows, &inputs[1].vector).unwrap()[0];
        let clean = d.score(&rows, &inputs[0].vector).unwrap()[0];
        assert!(faulty >= d.threshold && clean < d.threshold, "{faulty} {clean} {}", d.threshold);
        // Without vectors there is no gate; a decision without one scores as before, and reads as before.
        let bare: Vec<FitInput> = inputs.iter().cloned().map(|q| FitInput { vector: vec![], ..q }).collect();
        let (plain, _) = fit_inputs(&bare, 3, &mut || {}).unwrap();
        assert!(plain.gate.is_none());
        assert_eq!(plain.score(&rows, &[]).unwrap(), plain.predict(&rows));
        let json = serde_json::to_value(&plain).unwrap();
        assert!(json.get("gate").is_none());
        assert_eq!(serde_json::from_value::<Decision>(json).unwrap(), plain);
    }
}

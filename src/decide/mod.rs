//! The final decision for code inputs in SQL (sql/retrieve.sql, sql/eval.sql): what kind an input is, the
//! segments embedded beside it, the learned probability that each candidate applies, and fitting that decision
//! on golden inputs. The definitions live in `feedback_core::rank::{code, decide}`.

use feedback_core::rank::code::{kind, segments, view, Segmenting};
use feedback_core::rank::decide::{featurize, fit_inputs, raw_features, Decision, FitInput};
use pgrx::prelude::*;
use pgrx::JsonB;

use crate::error::FbError;

/// The decision shipped with the extension, fitted on the first four tune authors' code inputs (data/golden_code A-D)
/// for the model it names: `fb_calibrate()` on a demo database holding those, its '*' row's decision. Authors G-J,
/// written later, are tune data too; refitted on all eight, the held-out authors got more applicable notes but fewer
/// clean inputs left empty and fewer injected notes that apply (BENCHMARKS.md, "More tune authors"), so this one stays.
const SHIPPED: &str = include_str!("../../data/decision/code.json");

/// `prose` (a question, a description) or `code` (a snippet, a diff, a config file): at least two lines that look
/// like code.
#[pg_extern(immutable, strict, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_input_kind(query: &str) -> &'static str {
    kind(query).as_str()
}

/// Windows of lines a decision was fitted with when it does not say (every decision before 0.11.0).
pub(crate) const LEGACY_SEGMENTS: i64 = 8;

/// Most windows of lines a decision may ask for.
const MAX_SEGMENTS: i64 = 32;

/// What fb_retrieve embeds beside a code input for a decision: nothing when the decision was fitted on the whole
/// input alone (`max_segments` 0, the shipped one), else a diff's post-image (when it differs from the input),
/// then up to `max_segments` windows of lines (none for a short input). Its own C symbol: 0.7.0-0.10.0's
/// one-argument `_fb_segments` keeps `_fb_segments_wrapper` (src/compat.rs).
#[pg_extern(immutable, strict, parallel_safe, name = "_fb_segments")]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_segments_for(query: &str, decision: JsonB) -> Vec<String> {
    let max_segments = match decision.0.get("max_segments") {
        None | Some(serde_json::Value::Null) => LEGACY_SEGMENTS,
        Some(v) => match v.as_i64() {
            Some(n) if (0..=MAX_SEGMENTS).contains(&n) => n,
            _ => FbError::invalid_argument(
                format!("max_segments must be a whole number from 0 to {MAX_SEGMENTS}, not {v}"),
                "Refit the decision with fb_calibrate(code_segments => ...).",
            )
            .report(),
        },
    };
    segments_of(query, max_segments as usize)
}

/// A diff's post-image (when it differs from the input), then up to `max_segments` windows of lines; nothing
/// when `max_segments` is 0.
pub(crate) fn segments_of(query: &str, max_segments: usize) -> Vec<String> {
    // Refused before any copy is made, as fb_embed_batch would refuse the input itself.
    crate::host::check_size("query", query);
    if max_segments == 0 {
        return Vec::new();
    }
    let v = view(query);
    let mut out = Vec::new();
    if v != query && !v.trim().is_empty() {
        out.push(v);
    }
    out.extend(segments(query, &Segmenting { max_segments, ..Segmenting::default() }));
    out
}

/// The shipped decision, with the embedding model it was fitted for.
#[pg_extern(immutable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_shipped_decision() -> JsonB {
    // Parsed once per backend: fb_retrieve looks it up for every code input.
    static PARSED: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    JsonB(PARSED.get_or_init(|| serde_json::from_str(SHIPPED).expect("the shipped decision is valid JSON")).clone())
}

fn decision_of(value: serde_json::Value) -> Decision {
    let d: Decision = serde_json::from_value(value).unwrap_or_else(|e| {
        FbError::invalid_argument(format!("not a decision: {e}"), "Refit it with fb_calibrate().").report()
    });
    if !d.fits_this_build() {
        FbError::invalid_argument(
            "the decision was fitted on other features than this version computes",
            "Refit it with fb_calibrate(), or delete the decision to use the shipped one.",
        )
        .report();
    }
    d
}

/// Probability that each candidate applies to a code input: candidates in first-stage order, each with its
/// text (lesson, correction, wrong answer), its context (the reviewed input that led to it; blank: none), the
/// cosine of the whole input and the best cosine of any segment; `query_vector` is the input's own vector (as
/// fb_retrieve embeds it), which a decision with a gate reads. Its own C symbol: 0.7.0-0.11.0's seven-argument
/// `_fb_decide` keeps `_fb_decide_wrapper` (src/compat.rs).
#[pg_extern(immutable, parallel_safe, name = "_fb_decide")]
#[search_path(pg_catalog, @extschema@, pg_temp)]
#[allow(clippy::too_many_arguments)] // the SQL signature: one array per candidate field
fn _fb_decide_for(
    query: &str,
    docs: Vec<Option<String>>,
    contexts: Vec<Option<String>>,
    cosines: Vec<Option<f32>>,
    segment_cosines: Vec<Option<f32>>,
    n_segments: i32,
    decision: JsonB,
    query_vector: Vec<Option<f32>>,
) -> Vec<f32> {
    let vector: Vec<f32> = query_vector.iter().map(|v| v.unwrap_or(0.0)).collect();
    decide(query, docs, contexts, cosines, segment_cosines, n_segments, decision, Some(&vector))
}

/// [`_fb_decide_for`]'s work. `vector` None: an old SQL caller that has none, scored without the gate (as
/// before 0.12.0); a vector not of the gate's length is refused.
#[allow(clippy::too_many_arguments)]
pub(crate) fn decide(
    query: &str,
    docs: Vec<Option<String>>,
    contexts: Vec<Option<String>>,
    cosines: Vec<Option<f32>>,
    segment_cosines: Vec<Option<f32>>,
    n_segments: i32,
    decision: JsonB,
    vector: Option<&[f32]>,
) -> Vec<f32> {
    if docs.len() != cosines.len() || docs.len() != segment_cosines.len() || docs.len() != contexts.len() {
        FbError::invalid_argument(
            "docs, contexts, cosines and segment_cosines differ in length",
            "Pass one of each per candidate.",
        )
        .report();
    }
    let d = decision_of(decision.0);
    let docs: Vec<&str> = docs.iter().map(|d| d.as_deref().unwrap_or_default()).collect();
    let contexts: Vec<&str> = contexts.iter().map(|d| d.as_deref().unwrap_or_default()).collect();
    let c: Vec<f32> = cosines.iter().map(|c| c.unwrap_or(-1.0)).collect();
    let s: Vec<f32> = segment_cosines.iter().map(|c| c.unwrap_or(-1.0)).collect();
    let rows = featurize(&raw_features(query, &docs, &contexts, &c, &s), n_segments.max(0) as usize);
    let Some(vector) = vector else {
        return d.predict(&rows).into_iter().map(|p| p as f32).collect();
    };
    let scores = d.score(&rows, vector).unwrap_or_else(|| {
        FbError::invalid_argument(
            format!(
                "the decision reads the input's vector of {} dimensions, not {}",
                d.gate.as_ref().map_or(0, |g| g.weights.len()),
                vector.len()
            ),
            "Pass the input's vector from the model the decision was fitted for (fb_embed_batch(ARRAY[query], true)).",
        )
        .report()
    });
    scores.into_iter().map(|p| p as f32).collect()
}

/// Fits the decision on golden code inputs (a JSON array of {query, n_segments, graded: [[id, grade]...],
/// candidates: [{id, doc, context, cosine, segment}...]}): logistic regression on every candidate (grade 2: applies),
/// then the threshold that maximises the worst of applicable notes injected, injected notes that apply and clean
/// inputs left empty, at most `max_notes` per input. Returns the decision with what it gives on these inputs.
#[pg_extern(immutable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_fit_decision(inputs: JsonB, max_notes: i32, embedding_model: &str) -> JsonB {
    let inputs: Vec<FitInput> = serde_json::from_value(inputs.0).unwrap_or_else(|e| {
        FbError::invalid_argument(format!("decision input is not valid: {e}"), "Call fb_calibrate().").report()
    });
    let fitted = fit_inputs(&inputs, max_notes.max(1) as usize, &mut || {
        check_for_interrupts!();
    });
    let Some((decision, outcome)) = fitted else {
        FbError::invalid_argument(
            "no golden code input has a candidate that applies",
            "Grade the notes that apply to some golden code inputs (grade 2) before calibrating.",
        )
        .report()
    };
    let mut v = serde_json::to_value(&decision).expect("a decision serializes");
    v["embedding_model"] = serde_json::json!(embedding_model);
    v["max_notes"] = serde_json::json!(max_notes.max(1));
    v["fitted_on"] = serde_json::json!({"inputs": inputs.len(), "outcome": outcome});
    JsonB(v)
}

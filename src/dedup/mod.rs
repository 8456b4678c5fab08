//! Near-duplicate or revision, in SQL (sql/dedup.sql: the ingest merge and fb_compare_notes): the comparison of
//! two lessons and the model it decides with live in `feedback_core::dedup`; the database gives the cosines.

use feedback_core::dedup::{compare, needs_residual, residuals, Calibrated};
use pgrx::prelude::*;
use pgrx::JsonB;

/// The comparison model shipped with the extension, fitted on the tune authors of data/dedup/pairs
/// (`cargo run -p feedback_core --example dedup_pairs -- --fit P,Q data/dedup/pairs/*.jsonl`).
const SHIPPED: &str = include_str!("../../data/dedup/compare.json");

fn shipped() -> &'static Calibrated {
    // Parsed once per backend: every ingested note with a near neighbour is compared.
    static PARSED: std::sync::OnceLock<Calibrated> = std::sync::OnceLock::new();
    PARSED.get_or_init(|| {
        let m: Calibrated = serde_json::from_str(SHIPPED).expect("the shipped comparison model is valid JSON");
        assert!(m.fits_this_build(), "the shipped comparison model reads this build's features");
        m
    })
}

/// The cosine below which two notes are never compared (they can only be distinct): the nearest neighbours of a
/// new note at or above it are.
#[pg_extern(immutable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_dedup_neighbour() -> f64 {
    shipped().decisive()
}

/// For each older lesson (cosine with the newer one given), whether the comparison reads the cosine of their
/// residuals: only those pairs' residuals are embedded.
#[pg_extern(immutable, strict, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_needs_residuals(olders: Vec<Option<String>>, newer: &str, similarities: Vec<Option<f64>>) -> Vec<bool> {
    crate::host::check_size("lesson", newer);
    olders
        .iter()
        .zip(similarities.iter().chain(std::iter::repeat(&None)))
        .map(|(a, s)| match (a, s) {
            (Some(a), Some(s)) => {
                crate::host::check_size("lesson", a);
                needs_residual(a, newer, *s, shipped())
            }
            _ => false,
        })
        .collect()
}

/// What each of two lessons says apart from what they share (the texts whose cosine is `residual`).
#[pg_extern(immutable, strict, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_residuals(a: &str, b: &str) -> Vec<String> {
    crate::host::check_size("lesson", a);
    crate::host::check_size("lesson", b);
    let (x, y) = residuals(a, b);
    vec![x, y]
}

/// The verdict on a newer lesson `b` against an older `a`, given the cosine of their embeddings and of their
/// residuals: `{verdict, kind, similarity, residual_similarity, overlap, differences: [{change, a, b}], why}`.
#[pg_extern(immutable, strict, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_compare_texts(a: &str, b: &str, similarity: f64, residual: f64) -> JsonB {
    crate::host::check_size("lesson", a);
    crate::host::check_size("lesson", b);
    let c = compare(a, b, similarity, residual, shipped());
    let mut v = serde_json::to_value(&c).expect("a comparison serialises");
    v["residual_similarity"] = serde_json::json!(residual);
    v["kind"] = serde_json::json!(c.kind.map(|k| k.as_str()));
    v["differences"] =
        c.differences.iter().map(|d| serde_json::json!({"change": d.change.as_str(), "a": d.a, "b": d.b})).collect();
    JsonB(v)
}

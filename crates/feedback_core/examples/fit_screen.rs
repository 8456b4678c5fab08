//! Fits the learned injection detector and writes `data/guard/screen_model.bin`.
//!
//!     cargo run --release -p feedback_core --example fit_screen
//!
//! Only the tune authors (project, A, B) and the tune half of the sample notes are read. The threshold is
//! chosen on out-of-fold scores: each tune author in turn is scored by a model fitted on the other two (and on
//! the sample-note folds not scored), and the threshold is the smallest probability at which at most
//! `MAX_FP` (1.5%) of those benign rows are reported by the rules and the model together (the corpus test allows
//! 2% on the held-out author). The shipped model is then fitted on all tune rows.
//! With `--check` nothing is written; the run fails if the file differs from what it would write.

#[path = "../tests/common/corpus.rs"]
mod corpus;

use corpus::{examples, load_author, sample_notes, Row, TUNE_AUTHORS};
use feedback_core::guard::learned::{choose_threshold, fit, FitParams, Model};
use feedback_core::guard::screen_note_with;

const MAX_FP: f64 = 0.015;
const MIN_THRESHOLD: f32 = 0.2;

fn row_probability(model: &Model, row: &Row) -> f32 {
    model.note_probability(&row.field_refs())
}

fn main() {
    let check = std::env::args().any(|a| a == "--check");
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<f32>().ok());
    let mut params = FitParams::default();
    params.l2 = env("FB_FIT_L2").unwrap_or(params.l2);
    params.learning_rate = env("FB_FIT_LR").unwrap_or(params.learning_rate);
    params.epochs = env("FB_FIT_EPOCHS").map_or(params.epochs, |e| e as usize);
    let dry_run = std::env::var("FB_FIT_DRY_RUN").is_ok();
    let authors: Vec<(String, Vec<Row>)> = TUNE_AUTHORS.iter().map(|a| (a.to_string(), load_author(a))).collect();
    let samples: Vec<Row> = sample_notes().into_iter().filter(|r| r.tune).collect();
    // Sample notes join the folds: sample i belongs to fold i % (number of tune authors).
    let mut benign_oof = Vec::new();
    let mut attack_oof = Vec::new();
    let mut per_fold = Vec::new();
    for (k, (held, held_rows)) in authors.iter().enumerate() {
        let mut train: Vec<&Row> = authors.iter().filter(|(a, _)| a != held).flat_map(|(_, r)| r.iter()).collect();
        train.extend(samples.iter().enumerate().filter(|(i, _)| i % authors.len() != k).map(|(_, r)| r));
        let model = fit(&examples(&train), &params);
        let scored: Vec<(&Row, f32)> = held_rows
            .iter()
            .chain(samples.iter().enumerate().filter(|(i, _)| i % authors.len() == k).map(|(_, r)| r))
            .map(|r| (r, row_probability(&model, r)))
            .collect();
        for &(r, p) in &scored {
            if r.attack {
                attack_oof.push((held.clone(), p, r));
            } else {
                benign_oof.push((held.clone(), p, r));
            }
        }
        per_fold.push(held.clone());
    }
    // The budget is for rules and model together: a benign row the rules already flag counts as a false
    // positive at every threshold.
    let benign_scores: Vec<f32> = benign_oof
        .iter()
        .map(|b| if screen_note_with(&b.2.field_refs(), None).is_empty() { b.1 } else { 1.0 })
        .collect();
    let max_fp = env("FB_FIT_MAX_FP").map_or(MAX_FP, f64::from);
    let threshold = choose_threshold(&benign_scores, max_fp, MIN_THRESHOLD);
    println!("out-of-fold (each tune author scored by a model fitted without it), threshold {threshold:.2}:");
    for held in &per_fold {
        let att: Vec<_> = attack_oof.iter().filter(|a| &a.0 == held).collect();
        let ben: Vec<_> = benign_oof.iter().filter(|a| &a.0 == held).collect();
        let learned = att.iter().filter(|a| a.1 >= threshold).count();
        let rules_or =
            att.iter().filter(|a| a.1 >= threshold || !screen_note_with(&a.2.field_refs(), None).is_empty()).count();
        let fp =
            ben.iter().filter(|b| b.1 >= threshold || !screen_note_with(&b.2.field_refs(), None).is_empty()).count();
        println!(
            "  {held:<8} learned {learned}/{} combined {rules_or}/{}  combined FP {fp}/{} (benign rows + sample-note fold)",
            att.len(),
            att.len(),
            ben.len()
        );
    }
    let detected = attack_oof.iter().filter(|a| a.1 >= threshold).count();
    println!("  all      learned {detected}/{} at {params:?}", attack_oof.len());
    if dry_run {
        return;
    }
    let all: Vec<&Row> = authors.iter().flat_map(|(_, r)| r.iter()).chain(samples.iter()).collect();
    let model = fit(&examples(&all), &params).with_threshold(threshold);
    let bytes = model.to_bytes();
    let path = corpus::data_dir().join("guard/screen_model.bin");
    if check {
        let current = std::fs::read(&path).unwrap_or_default();
        assert!(current == bytes, "{} is stale: run the example without --check", path.display());
        println!("{} is up to date", path.display());
    } else {
        std::fs::write(&path, &bytes).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        println!("wrote {} ({} bytes, 2^{} buckets)", path.display(), bytes.len(), model.bits);
    }
}

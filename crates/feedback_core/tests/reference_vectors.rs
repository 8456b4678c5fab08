//! The Rust inference path against reference outputs computed by Python onnxruntime with the same
//! tokenizer.json (scripts/make_reference_vectors.py): every sentence must reach cosine >= 0.999, run alone
//! and run in batches.
//!
//! The int8 graphs quantize activations with one scale per batch tensor, so a text's output depends slightly on
//! its batch-mates (~0.997 cosine between batched and single runs, in Python too). The batched references group
//! texts exactly as the extension does, so both paths are held to 0.999. ONNX Runtime's int8 kernels differ between
//! instruction sets, so the references are kept per instruction set and the test reads this machine's.

mod common;

use feedback_core::model::{cosine, LocalHost, ModelHost, TextRole};

/// The reference outputs of this machine's instruction set (the int8 kernels differ between AVX2 and AVX-512
/// VNNI), with the file's batch size.
fn reference() -> serde_json::Value {
    let whole: serde_json::Value = serde_json::from_str(&common::fixture("reference.json")).unwrap();
    let isa = common::isa();
    let mut section = whole["by_isa"][isa].clone();
    assert!(
        section.is_object(),
        "no reference outputs for {isa} in tests/fixtures/reference.json: run make fixtures here"
    );
    section["batch_size"] = whole["batch_size"].clone();
    section
}

fn check_model(model: &str) {
    let cfg = common::config();
    let sentences = common::fixture("sentences.txt");
    let sentences: Vec<&str> = sentences.lines().collect();
    let reference = reference();
    let expected: Vec<Vec<f32>> = serde_json::from_value(reference["embeddings"][model].clone()).unwrap();
    let expected_batched: Vec<Vec<f32>> =
        serde_json::from_value(reference["embeddings_batched"][model].clone()).unwrap();
    assert_eq!(expected.len(), sentences.len(), "fixture out of date: run make fixtures");
    assert_eq!(reference["batch_size"], cfg.batch_size);

    let mut host = LocalHost::new();
    // Batched (batch_size 4: padding and masks matter) and one by one must both match.
    let batched = host.embed(&cfg, model, &sentences, TextRole::Document, &mut || {}).unwrap();
    for (i, sentence) in sentences.iter().enumerate() {
        let single = host.embed(&cfg, model, &[sentence], TextRole::Document, &mut || {}).unwrap();
        for (how, got, want) in [("single", &single[0], &expected[i]), ("batched", &batched[i], &expected_batched[i])] {
            assert_eq!(got.len(), 384);
            let norm: f32 = got.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "{model} {how} #{i}: norm {norm}");
            let c = cosine(got, want);
            assert!(c >= 0.999, "{model} {how} sentence #{i} ({sentence:.40}): cosine {c}");
        }
    }
}

#[test]
fn bge_small_matches_python_onnxruntime() {
    check_model("bge-small-en-v1.5");
}

#[test]
fn all_minilm_matches_python_onnxruntime() {
    check_model("all-MiniLM-L6-v2");
}

#[test]
fn query_prefix_changes_the_bge_vector() {
    let cfg = common::config();
    let mut host = LocalHost::new();
    let text = ["is this query injectable"];
    let doc = host.embed(&cfg, "bge-small-en-v1.5", &text, TextRole::Document, &mut || {}).unwrap();
    let query = host.embed(&cfg, "bge-small-en-v1.5", &text, TextRole::Query, &mut || {}).unwrap();
    let c = cosine(&doc[0], &query[0]);
    assert!(c < 0.999 && c > 0.5, "query prefix should change the vector a little, cosine {c}");
}

#[test]
fn cross_encoder_matches_python_onnxruntime() {
    let cfg = common::config();
    let reference = reference();
    let expected: Vec<f32> = serde_json::from_value(reference["rerank"].clone()).unwrap();
    let expected_batched: Vec<f32> = serde_json::from_value(reference["rerank_batched"].clone()).unwrap();
    let pairs = common::fixture("rerank_pairs.tsv");
    let mut host = LocalHost::new();
    let pairs: Vec<(&str, &str)> = pairs.lines().map(|l| l.split_once('\t').unwrap()).collect();
    assert_eq!(pairs.len(), expected.len());
    for (i, (query, passage)) in pairs.iter().enumerate() {
        let score = host.rerank(&cfg, "ms-marco-MiniLM-L-12-v2", query, &[passage], &mut || {}).unwrap()[0];
        assert!((score - expected[i]).abs() < 0.01, "pair #{i}: {score} vs {}", expected[i]);
    }
    // Two passages per run: padded to the longer pair, with the real attention mask.
    for (c, chunk) in pairs.chunks(2).enumerate() {
        let passages: Vec<&str> = chunk.iter().map(|p| p.1).collect();
        let scores = host.rerank(&cfg, "ms-marco-MiniLM-L-12-v2", chunk[0].0, &passages, &mut || {}).unwrap();
        for (j, score) in scores.iter().enumerate() {
            let want = expected_batched[2 * c + j];
            assert!((score - want).abs() < 0.01, "batched pair #{}: {score} vs {want}", 2 * c + j);
        }
    }
}

#[test]
fn long_inputs_are_truncated_not_rejected() {
    let cfg = common::config();
    let mut host = LocalHost::new();
    let long = "word ".repeat(5000);
    let v = host.embed(&cfg, "all-MiniLM-L6-v2", &[&long], TextRole::Document, &mut || {}).unwrap();
    assert_eq!(v[0].len(), 384);
    assert!(host.count_tokens(&cfg, "bge-small-en-v1.5", &long).unwrap() >= 5000);
    // Counting switches truncation off only for the count: a long input still embeds (truncated) afterwards,
    // to the same vector as before the count.
    let before = host.embed(&cfg, "bge-small-en-v1.5", &[&long], TextRole::Document, &mut || {}).unwrap();
    assert!(host.count_tokens(&cfg, "bge-small-en-v1.5", &long).unwrap() >= 5000);
    let after = host.embed(&cfg, "bge-small-en-v1.5", &[&long], TextRole::Document, &mut || {}).unwrap();
    assert_eq!(before, after);
}

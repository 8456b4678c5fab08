//! Calls are split into model runs bounded by rows and padded tokens, for embedding and reranking; the caller's
//! `between` callback runs before every model run and between tokenization chunks, so a cancelled call stops
//! within one run.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};

use feedback_core::model::{cosine, plan_runs, HostConfig, LocalHost, ModelHost, TextRole};

const EMBEDDER: &str = "bge-small-en-v1.5";
const CROSS_ENCODER: &str = "ms-marco-MiniLM-L-12-v2";

/// Texts of very different lengths, so a token budget splits what a row count alone would not.
fn texts() -> Vec<String> {
    let sentence = "Calling requests.get without a timeout can hang a worker forever.";
    (0..40).map(|i| format!("Note {i}: {}", vec![sentence; 1 + (i * 7) % 12].join(" "))).collect()
}

fn config(batch_size: usize, max_batch_tokens: usize) -> HostConfig {
    HostConfig { batch_size, max_batch_tokens, ..common::config() }
}

#[test]
fn embedding_runs_follow_the_token_budget_and_match_single_runs() {
    let texts = texts();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let cfg = config(64, 600);
    let mut host = LocalHost::new();
    // Token lengths as the model sees them: special tokens included, truncated to 512.
    let lengths: Vec<usize> =
        texts.iter().map(|t| (host.count_tokens(&cfg, EMBEDDER, t).unwrap() + 2).min(512)).collect();
    let expected_runs = plan_runs(&lengths, cfg.run_limits()).len();
    assert!(expected_runs > 1 && expected_runs < texts.len(), "{expected_runs} runs: the budget must bind");

    let before = host.stats();
    let mut calls = 0;
    let vectors = host.embed(&cfg, EMBEDDER, &texts, TextRole::Document, &mut || calls += 1).unwrap();
    let after = host.stats();
    assert_eq!(after.embed_runs - before.embed_runs, expected_runs as u64);
    assert_eq!(after.texts_embedded - before.texts_embedded, texts.len() as u64);
    // Once before every run; 40 texts are one tokenization chunk.
    assert_eq!(calls, expected_runs);

    // Input order is kept: each vector matches its text embedded alone (int8 activations are quantised per run,
    // so batch-mates move a vector slightly).
    for (i, text) in texts.iter().enumerate() {
        let alone = host.embed(&cfg, EMBEDDER, &[text], TextRole::Document, &mut || {}).unwrap();
        let c = cosine(&vectors[i], &alone[0]);
        assert!(c >= 0.99, "text #{i}: cosine {c}");
    }
}

#[test]
fn reranking_many_passages_runs_in_bounded_runs() {
    // Every fifth passage answers the query, the rest are off topic: misplaced scores would stand out.
    let answer = "Set a connect and read timeout on every outbound HTTP call, or a stalled server hangs the worker.";
    let off_topic = "The bakery on the corner sells fresh bread every morning and closes early on Sundays.";
    let passages: Vec<String> =
        (0..40).map(|i| vec![if i % 5 == 0 { answer } else { off_topic }; 1 + (i * 7) % 12].join(" ")).collect();
    let passages: Vec<&str> = passages.iter().map(String::as_str).collect();
    let query = "should outbound HTTP calls have a timeout?";
    let mut host = LocalHost::new();
    let alone: Vec<f32> = passages
        .iter()
        .map(|p| host.rerank(&config(1, 100_000), CROSS_ENCODER, query, &[p], &mut || {}).unwrap()[0])
        .collect();

    let cfg = config(8, 1500);
    let before = host.stats();
    let mut calls = 0;
    let scores = host.rerank(&cfg, CROSS_ENCODER, query, &passages, &mut || calls += 1).unwrap();
    let runs = host.stats().rerank_runs - before.rerank_runs;
    assert!(runs > (passages.len() / 8) as u64 && runs < passages.len() as u64, "{runs} runs: the budget must bind");
    assert_eq!(calls as u64, runs);
    assert_eq!(host.stats().pairs_scored - before.pairs_scored, passages.len() as u64);
    // Scores come back in input order. int8 activations are quantised per run, so batch-mates move a logit a
    // little (up to ~0.7 seen on near-identical passages); answers and off-topic passages are far apart.
    for (i, (s, a)) in scores.iter().zip(&alone).enumerate() {
        assert!((s - a).abs() < 1.0, "passage #{i}: {s} in a run, {a} alone");
        let relevant = i % 5 == 0;
        assert!(scores.iter().enumerate().all(|(j, t)| relevant == (j % 5 == 0) || (s > t) == relevant), "#{i}");
    }
}

#[test]
fn between_is_called_between_tokenization_chunks() {
    // 200 texts in one call chunk (batch_size 200): 4 tokenization chunks of 64 (3 calls between them), then one
    // call before each run (the token budget makes several).
    let texts: Vec<String> = (0..200).map(|i| format!("short note number {i}")).collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let cfg = config(200, 1024);
    let mut host = LocalHost::new();
    let before = host.stats().embed_runs;
    let mut calls = 0;
    host.embed(&cfg, EMBEDDER, &texts, TextRole::Document, &mut || calls += 1).unwrap();
    let runs = host.stats().embed_runs - before;
    assert!(runs > 1, "{runs} runs");
    assert_eq!(calls as u64, 3 + runs);
}

#[test]
fn a_cancellation_in_between_stops_the_call_within_one_run() {
    // The extension's callback raises an ERROR on query cancel (a Rust panic through pgrx): no run starts after it.
    let texts = texts();
    let passages: Vec<&str> = texts.iter().map(String::as_str).collect();
    let cfg = config(4, 100_000);
    let mut host = LocalHost::new();
    let cross_encoder_runs = |host: &mut LocalHost| host.cross_encoder(&cfg, CROSS_ENCODER).unwrap().runs();
    let embedder_runs = |host: &mut LocalHost| host.embedder(&cfg, EMBEDDER).unwrap().runs();

    let before = cross_encoder_runs(&mut host);
    cancel_at(3, "canceling statement due to statement timeout", |between| {
        host.rerank(&cfg, CROSS_ENCODER, "query", &passages, between)
    });
    // 10 runs of 4 were planned: the 3rd call, before the 3rd run, stopped it after 2.
    assert_eq!(cross_encoder_runs(&mut host) - before, 2);

    let before = embedder_runs(&mut host);
    cancel_at(2, "canceling statement due to user request", |between| {
        host.embed(&cfg, EMBEDDER, &passages, TextRole::Document, between)
    });
    assert_eq!(embedder_runs(&mut host) - before, 1);

    // The host still works after a cancellation.
    let v = host.embed(&cfg, EMBEDDER, &["still works"], TextRole::Document, &mut || {}).unwrap();
    assert_eq!(v[0].len(), 384);
    let s = host.rerank(&cfg, CROSS_ENCODER, "query", &["still works"], &mut || {}).unwrap();
    assert_eq!(s.len(), 1);
}

/// Runs `call` with a `between` that panics with `message` on its `nth` call, as the extension's callback raises an
/// ERROR on query cancel; the panic must come out of the call.
fn cancel_at<T>(nth: usize, message: &str, call: impl FnOnce(&mut dyn FnMut()) -> T) {
    let mut calls = 0;
    let cancelled = catch_unwind(AssertUnwindSafe(|| {
        call(&mut || {
            calls += 1;
            if calls == nth {
                panic!("{message}");
            }
        })
    }));
    assert!(cancelled.is_err());
}

#[test]
fn pair_length_limit_cuts_the_passage_not_the_query() {
    let query = "should outbound HTTP calls have a timeout?";
    let short = "Set a timeout on every outbound HTTP call.";
    // The answer comes after 60 words of filler: a 32-token pair never sees it.
    let filler = ["The bakery on the corner sells fresh bread every morning."; 6].join(" ");
    let long = format!("{filler} Set a timeout on every outbound HTTP call, or a stalled server hangs the worker.");
    let mut host = LocalHost::new();
    let full = host.rerank(&config(8, 8192), CROSS_ENCODER, query, &[short, &long], &mut || {}).unwrap();
    let cut_cfg = HostConfig { max_pair_tokens: 32, ..config(8, 8192) };
    let cut = host.rerank(&cut_cfg, CROSS_ENCODER, query, &[short, &long], &mut || {}).unwrap();
    // A pair within the limit scores as before; the long passage loses its answer and its score.
    assert!((full[0] - cut[0]).abs() < 0.5, "short pair: {} then {}", full[0], cut[0]);
    assert!(full[1] > cut[1] + 2.0, "long pair: {} in full, {} cut to 32 tokens", full[1], cut[1]);
    // The limit is per call: 0 is the model's own limit again.
    let again = host.rerank(&config(8, 8192), CROSS_ENCODER, query, &[short, &long], &mut || {}).unwrap();
    assert_eq!(again, full);
}

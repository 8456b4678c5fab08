//! How rows per model run and intra-op threads change speed, and how much a text's result depends on its
//! run-mates (the int8 graphs quantize activations with one scale per run). The numbers behind
//! pg_feedback.batch_merge's default (README, "Where models run").
//!
//! FB_MODEL_DIR=... FB_ORT_LIBRARY=... cargo run --release -p feedback_core --example batch_effect
use feedback_core::model::{cosine, HostConfig, LocalHost, ModelHost, TextRole};
fn main() {
    let base = HostConfig {
        runtime_library: std::env::var("FB_ORT_LIBRARY").unwrap().into(),
        model_dir: std::env::var("FB_MODEL_DIR").unwrap().into(),
        intra_threads: 1,
        dimensions: 384,
        batch_size: 64,
        max_batch_tokens: 1024,
        max_pair_tokens: 0,
    };
    let mut rdr = csv::Reader::from_path("data/sample_notes.csv").unwrap();
    let texts: Vec<String> = rdr
        .records()
        .map(|r| {
            let r = r.unwrap();
            format!("{} {} {}", &r[1], &r[2], &r[3])
        })
        .collect();
    let t: Vec<&str> = texts.iter().map(|s| s.as_str()).collect();
    let m = "bge-small-en-v1.5";
    let ce = "ms-marco-MiniLM-L-12-v2";
    for threads in [1usize, 2] {
        let mut h = LocalHost::new();
        for (rows, tokens) in [(1usize, 1024usize), (8, 1024), (64, 1024), (64, 8192)] {
            let cfg = HostConfig { intra_threads: threads, batch_size: rows, max_batch_tokens: tokens, ..base.clone() };
            h.embed(&cfg, m, &t[..4], TextRole::Document, &mut || ()).unwrap();
            let t0 = std::time::Instant::now();
            let _ = h.embed(&cfg, m, &t, TextRole::Document, &mut || ()).unwrap();
            let te = t0.elapsed().as_secs_f64();
            h.rerank(&cfg, ce, "warm", &t[..2], &mut || ()).unwrap();
            let t0 = std::time::Instant::now();
            let _ = h
                .rerank(&cfg, ce, "is the user id from the URL injectable in this SELECT?", &t[..100], &mut || ())
                .unwrap();
            let tr = t0.elapsed().as_secs_f64();
            println!(
                "threads {threads} rows {rows} tokens {tokens}: embed {:.0} texts/s, rerank {:.1} ms/pair",
                t.len() as f64 / te,
                tr * 1000.0 / 100.0
            );
        }
    }
    let mut h = LocalHost::new();
    let c1 = HostConfig { batch_size: 1, ..base.clone() };
    let alone = h.embed(&c1, m, &t, TextRole::Document, &mut || ()).unwrap();
    let batched = h.embed(&base, m, &t, TextRole::Document, &mut || ()).unwrap();
    let mut cs: Vec<f32> = alone.iter().zip(&batched).map(|(a, b)| cosine(a, b)).collect();
    cs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!("embed alone vs batched: cosine min {:.4}, median {:.4}", cs[0], cs[cs.len() / 2]);
    let a = h.rerank(&c1, ce, "is the user id from the URL injectable?", &t[..40], &mut || ()).unwrap();
    let b = h.rerank(&base, ce, "is the user id from the URL injectable?", &t[..40], &mut || ()).unwrap();
    let d: f32 = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max);
    println!("rerank alone vs batched: max |diff| {d} logits");
}

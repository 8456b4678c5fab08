//! The shared worker's protocol and batching, with real models: a RemoteHost whose transport carries requests as
//! bytes to `serve` over a LocalHost (as the worker does, minus shared memory) gives what a LocalHost gives; several
//! callers' requests answered together share runs; an error fails only its own request.

mod common;

use feedback_core::model::remote::{decode_reply, encode_reply, serve, Job, Output, RemoteHost, Request, Transport};
use feedback_core::model::{cosine, HostConfig, LocalHost, ModelError, ModelHost, Result, TextRole};

const EMBEDDER: &str = "bge-small-en-v1.5";
const CROSS_ENCODER: &str = "ms-marco-MiniLM-L-12-v2";

/// Bytes in, bytes out, as through shared memory; counts the requests it carried.
struct Loopback {
    host: LocalHost,
    cfg: HostConfig,
    requests: usize,
}

impl Transport for Loopback {
    fn call(&mut self, request: &Request, between: &mut dyn FnMut()) -> Result<Output> {
        self.requests += 1;
        let received = Request::decode(&request.encode())?;
        let reply = serve(&mut self.host, &self.cfg, &[&received], between).remove(0);
        let mut buf = vec![0u8; request.reply_capacity(self.cfg.dimensions)];
        let n = encode_reply(&reply, &mut buf);
        decode_reply(&buf[..n])
    }
}

fn texts() -> Vec<String> {
    (0..10).map(|i| format!("Note {i}: {}", "Always pass a timeout to requests.get. ".repeat(1 + i % 4))).collect()
}

#[test]
fn a_remote_host_gives_what_a_local_host_gives() {
    let cfg = common::config(); // batch_size 4: ten texts go as three requests
    let texts = texts();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut local = LocalHost::new();
    let mut remote = RemoteHost::new(Loopback { host: LocalHost::new(), cfg: cfg.clone(), requests: 0 });

    // Both hosts split calls into batch_size chunks (the remote one sends a request per chunk), so every text meets
    // the same run-mates: the int8 graphs quantize activations per run, and other run-mates would change vectors.
    let a = local.embed(&cfg, EMBEDDER, &texts, TextRole::Document, &mut || ()).unwrap();
    let b = remote.embed(&cfg, EMBEDDER, &texts, TextRole::Document, &mut || ()).unwrap();
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert!(cosine(x, y) > 0.99999, "{}", cosine(x, y));
    }
    let q = remote.embed(&cfg, EMBEDDER, &["is a timeout needed?"], TextRole::Query, &mut || ()).unwrap();
    let ql = local.embed(&cfg, EMBEDDER, &["is a timeout needed?"], TextRole::Query, &mut || ()).unwrap();
    assert!(cosine(&q[0], &ql[0]) > 0.9999);

    let s1 = local.rerank(&cfg, CROSS_ENCODER, "timeouts", &texts, &mut || ()).unwrap();
    let s2 = remote.rerank(&cfg, CROSS_ENCODER, "timeouts", &texts, &mut || ()).unwrap();
    for (x, y) in s1.iter().zip(&s2) {
        assert!((x - y).abs() < 1e-4, "{x} vs {y}");
    }
    assert_eq!(
        local.count_tokens(&cfg, EMBEDDER, texts[3]).unwrap(),
        remote.count_tokens(&cfg, EMBEDDER, texts[3]).unwrap()
    );
    // 3 + 1 + 3 + 1 requests; stats count requests and texts.
    assert_eq!(remote.stats().embed_runs, 4);
    assert_eq!(remote.stats().texts_embedded, 11);
    assert_eq!(remote.stats().pairs_scored, 10);

    // A model error comes back as the same error a local host gives.
    let err = remote.embed(&cfg, "no-such-model", &["x"], TextRole::Document, &mut || ()).unwrap_err();
    assert!(matches!(err, ModelError::NotFound { .. }), "{err}");
    let err = remote.embed(&cfg, EMBEDDER, &["x"], TextRole::Document, &mut || ()).map(|_| ());
    assert!(err.is_ok(), "the next call works");
}

/// Merged requests share model runs (fewer runs); their results match the requests answered alone up to the int8
/// graphs' per-run activation quantization (cosine about 0.997, scores up to about a logit apart), which is why the worker
/// merges only when pg_feedback.batch_merge is on.
#[test]
fn requests_answered_together_match_requests_answered_alone() {
    let cfg = HostConfig { batch_size: 64, ..common::config() };
    let texts = texts();
    let req = |job| common::request(&cfg, EMBEDDER, job);
    let rerank = |pairs| common::request(&cfg, CROSS_ENCODER, Job::Rerank { pairs });
    let requests = [
        req(Job::Embed { texts: texts[..3].to_vec(), query: false }),
        rerank(vec![("a".into(), texts[0].clone()), ("b".into(), texts[1].clone())]),
        req(Job::Embed { texts: vec!["q one".into()], query: true }),
        req(Job::Embed { texts: texts[3..].to_vec(), query: false }),
        req(Job::CountTokens { text: texts[2].clone() }),
        rerank(vec![("c".into(), texts[5].clone())]),
        req(Job::Embed { texts: vec!["q two".into()], query: true }),
    ];
    let refs: Vec<&Request> = requests.iter().collect();
    let mut host = LocalHost::new();
    let together = serve(&mut host, &cfg, &refs, &mut || ());
    let runs_together = host.stats().embed_runs + host.stats().rerank_runs;
    let mut alone_host = LocalHost::new();
    let alone: Vec<Result<Output>> =
        refs.iter().map(|r| serve(&mut alone_host, &cfg, &[r], &mut || ()).remove(0)).collect();
    let runs_alone = alone_host.stats().embed_runs + alone_host.stats().rerank_runs;
    assert!(runs_together < runs_alone, "{runs_together} runs together, {runs_alone} alone");
    for (t, a) in together.iter().zip(&alone) {
        match (t.as_ref().unwrap(), a.as_ref().unwrap()) {
            (Output::Vectors(x), Output::Vectors(y)) => {
                assert_eq!(x.len(), y.len());
                x.iter().zip(y).for_each(|(u, v)| assert!(cosine(u, v) > 0.99, "{}", cosine(u, v)));
            }
            (Output::Scores(x), Output::Scores(y)) => {
                assert_eq!(x.len(), y.len());
                x.iter().zip(y).for_each(|(u, v)| assert!((u - v).abs() < 1.5, "{u} vs {v}"));
            }
            (x, y) => assert_eq!(x, y),
        }
    }
}

#[test]
fn an_error_fails_only_the_requests_it_concerns() {
    let cfg = common::config();
    let good = common::request(&cfg, EMBEDDER, Job::Embed { texts: vec!["a".into()], query: false });
    // Same group as `good` (same model name and kind) but a pinned key whose weights are not installed.
    let pinned = format!("{EMBEDDER}@{}", "0".repeat(64));
    let wrong_pin = Request { model: pinned, ..good.clone() };
    let unknown = Request { model: "no-such-model".into(), ..good.clone() };
    let mut host = LocalHost::new();
    let replies = serve(&mut host, &cfg, &[&good, &wrong_pin, &unknown, &good], &mut || ());
    assert!(matches!(replies[0], Ok(Output::Vectors(_))));
    assert!(matches!(replies[1], Err(ModelError::Changed { .. })), "{:?}", replies[1]);
    assert!(matches!(replies[2], Err(ModelError::NotFound { .. })), "{:?}", replies[2]);
    assert!(matches!(replies[3], Ok(Output::Vectors(_))));
}

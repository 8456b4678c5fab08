//! The backend's side of the model seam, reading settings on every call. Callers never see sessions, only
//! vectors and scores. Models run in the shared inference worker when it is in use (`pg_feedback.inference`),
//! else in a [`LocalHost`] of this backend, created on first use (never in the postmaster).

use std::cell::RefCell;

use feedback_core::model::remote::RemoteHost;
use feedback_core::model::{
    installed_key, HostConfig, HostStats, LocalHost, ModelError, ModelHost, QueryCache, ScoreCache, TextRole,
};
use pgrx::check_for_interrupts;

use crate::error::{FbError, OrReport};
use crate::gucs;
use crate::worker::{self, client::Shm};

thread_local! {
    static HOST: RefCell<LocalHost> = const { RefCell::new(LocalHost::new()) };
    static WORKER: RefCell<RemoteHost<Shm>> = const { RefCell::new(RemoteHost::new(Shm)) };
    static QUERY_CACHE: RefCell<QueryCache> = RefCell::new(QueryCache::new(gucs::query_cache_size()));
    static SCORE_CACHE: RefCell<ScoreCache> = RefCell::new(ScoreCache::new(gucs::rerank_cache_size()));
}

/// Refuses a text larger than `pg_feedback.max_input_bytes` before any tokenizer or regex sees it.
pub fn check_size(what: &str, text: &str) {
    let limit = gucs::max_input_bytes();
    if text.len() > limit {
        FbError::limit_exceeded(
            format!("{what} is {} bytes, more than pg_feedback.max_input_bytes ({limit})", text.len()),
            "Shorten the text: a note is a lesson and a correction, not a document. A superuser can raise \
             pg_feedback.max_input_bytes.",
        )
        .report();
    }
}

/// Refuses a call whose inputs total more than `pg_feedback.max_call_bytes` (`what` names them), before any work.
/// The role acting is what counts, not the current user: `fb_retrieve` and the insert trigger run as the
/// extension's owner (SECURITY DEFINER) for any caller, so only a session acting as a superuser (SET ROLE role, else
/// the session user: `GetOuterUserId`) is not held to it, e.g. for `fb_reembed`. The insert trigger embeds a
/// writer's rows in chunks that stay under the limit.
pub fn check_call(what: &str, total: usize) {
    let limit = gucs::max_call_bytes();
    // SAFETY: GetOuterUserId and superuser_arg read backend state and the role's catalog row; called on the
    // backend's main thread.
    if total > limit && !unsafe { pgrx::pg_sys::superuser_arg(pgrx::pg_sys::GetOuterUserId()) } {
        FbError::limit_exceeded(
            format!("{what} total {total} bytes, more than pg_feedback.max_call_bytes ({limit})"),
            "Send fewer or shorter texts per call: split the array over several calls. A superuser can raise \
             pg_feedback.max_call_bytes.",
        )
        .report();
    }
}

/// Both caps on a call's texts (each one named `what`), checked before any of them is tokenized.
pub fn check_texts<'a>(what: &str, texts: impl IntoIterator<Item = &'a str>) {
    let mut total = 0usize;
    for text in texts {
        check_size(what, text);
        total = total.saturating_add(text.len());
    }
    check_call(&format!("the {what}s of this call"), total);
}

/// Both caps on a rerank call: the query and each passage, and the pairs' total (the query is tokenized once per
/// pair, so it counts once per pair).
pub fn check_pairs<'a>(query: &str, passages: impl IntoIterator<Item = &'a str>) {
    check_size("query", query);
    let mut total = 0usize;
    for passage in passages {
        check_size("passage", passage);
        total = total.saturating_add(query.len() + passage.len());
    }
    check_call("the (query, passage) pairs of this call", total);
}

/// Runs `f` on the backend's host with the model named by `setting`; a failure names that setting.
fn try_run<R>(
    setting: &'static str,
    model: String,
    f: impl FnOnce(&mut dyn ModelHost, &HostConfig, &str) -> Result<R, ModelError>,
) -> Result<R, FbError> {
    let cfg = gucs::host_config();
    if worker::in_use() {
        WORKER.with(|host| f(&mut *host.borrow_mut(), &cfg, &model)).map_err(FbError::model(setting))
    } else {
        HOST.with(|host| f(&mut *host.borrow_mut(), &cfg, &model)).map_err(FbError::model(setting))
    }
}

/// Called by the host before every model run and between tokenization chunks: a cancelled statement (or a
/// statement_timeout) stops there, within one run.
fn between_runs() {
    check_for_interrupts!();
}

fn try_embed(model: &str, texts: &[&str], role: TextRole) -> Result<Vec<Vec<f32>>, FbError> {
    check_texts("text", texts.iter().copied());
    try_run("pg_feedback.embedding_model", model.to_string(), |host, cfg, model| {
        host.embed(cfg, model, texts, role, &mut between_runs)
    })
}

/// Embeds `texts` with `model` (a pinned key `name@sha256`, whose loaded weights must be the pinned ones, or a
/// folder name), in input order, in runs bounded by `pg_feedback.embed_batch_size` and
/// `pg_feedback.max_batch_tokens`; cancellable between model runs.
pub fn embed(model: &str, texts: &[&str], role: TextRole) -> Vec<Vec<f32>> {
    try_embed(model, texts, role).or_report()
}

/// The key (`name@sha256`) of the installed embedding model `name`, read from its manifest.
pub fn model_key(name: &str) -> String {
    installed_key(&gucs::host_config(), name).map_err(FbError::model("pg_feedback.embedding_model")).or_report()
}

/// A query's embedding by `model` (as for [`embed`]), through the backend's bounded cache keyed by (model, text).
pub fn embed_query(model: &str, text: &str) -> Vec<f32> {
    embed_queries(model, &[text]).pop().unwrap_or_default()
}

/// Many queries' embeddings by `model`, in input order, through the same cache: the texts it does not hold are
/// embedded together in one call (one round trip to the worker), then kept.
pub fn embed_queries(model: &str, texts: &[&str]) -> Vec<Vec<f32>> {
    let mut out: Vec<Option<Vec<f32>>> = QUERY_CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        cache.set_capacity(gucs::query_cache_size());
        texts.iter().map(|t| cache.get(&(model.to_string(), t.to_string()))).collect()
    });
    let missing: Vec<usize> = (0..texts.len()).filter(|&i| out[i].is_none()).collect();
    if !missing.is_empty() {
        let batch: Vec<&str> = missing.iter().map(|&i| texts[i]).collect();
        let vectors = embed(model, &batch, TextRole::Query);
        QUERY_CACHE.with(|cache| {
            let mut cache = cache.borrow_mut();
            for (&i, v) in missing.iter().zip(vectors) {
                cache.insert((model.to_string(), texts[i].to_string()), v.clone());
                out[i] = Some(v);
            }
        });
    }
    out.into_iter().map(Option::unwrap_or_default).collect()
}

/// (entries, hits, misses) of the query cache.
pub fn query_cache_stats() -> (usize, u64, u64) {
    QUERY_CACHE.with(|cache| cache.borrow().stats())
}

/// Cross-encoder scores of `passages` against `query`, in input order, in runs bounded like embedding runs;
/// cancellable between model runs.
pub fn rerank(query: &str, passages: &[&str]) -> Vec<f32> {
    if gucs::rerank_model().is_empty() {
        FbError::NotConfigured {
            message: "no cross-encoder is configured (pg_feedback.rerank_model is empty)".into(),
            hint: "Set pg_feedback.rerank_model (superuser) to an installed cross-encoder (see fb_models()).".into(),
        }
        .report();
    }
    check_pairs(query, passages.iter().copied());
    try_run("pg_feedback.rerank_model", gucs::rerank_model(), |host, cfg, model| {
        host.rerank(cfg, model, query, passages, &mut between_runs)
    })
    .or_report()
}

/// [`rerank`] through the backend's bounded score cache, keyed by (cross-encoder, pair length limit, query,
/// passage): only passages not scored before for this query run the model, in one call.
pub fn rerank_cached(query: &str, passages: &[&str]) -> Vec<f32> {
    let model = format!("{}#{}", gucs::rerank_model(), gucs::rerank_max_tokens());
    let key = |p: &str| (model.clone(), query.to_string(), p.to_string());
    let mut scores: Vec<Option<f32>> = SCORE_CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        cache.set_capacity(gucs::rerank_cache_size());
        passages.iter().map(|p| cache.get(&key(p))).collect()
    });
    let missing: Vec<&str> = passages.iter().zip(&scores).filter(|(_, s)| s.is_none()).map(|(p, _)| *p).collect();
    if !missing.is_empty() {
        let fresh = rerank(query, &missing);
        SCORE_CACHE.with(|cache| {
            let mut cache = cache.borrow_mut();
            for (p, &s) in missing.iter().zip(&fresh) {
                cache.insert(key(p), s);
            }
        });
        let mut fresh = fresh.into_iter();
        for s in scores.iter_mut().filter(|s| s.is_none()) {
            *s = fresh.next();
        }
    }
    scores.into_iter().map(|s| s.unwrap_or(f32::NAN)).collect()
}

/// Tokens the embedding model's tokenizer makes of `text`.
pub fn count_tokens(text: &str) -> usize {
    check_texts("text", [text]);
    try_run("pg_feedback.embedding_model", gucs::embedding_model(), |host, cfg, model| {
        host.count_tokens(cfg, model, text)
    })
    .or_report()
}

/// What this backend's model work has been so far, in either mode (through the worker: requests count as runs;
/// loaded sessions are this backend's own).
pub fn stats() -> HostStats {
    let local = HOST.with(|host| host.borrow().stats());
    let remote = WORKER.with(|host| host.borrow().stats());
    HostStats {
        embed_runs: local.embed_runs + remote.embed_runs,
        texts_embedded: local.texts_embedded + remote.texts_embedded,
        rerank_runs: local.rerank_runs + remote.rerank_runs,
        pairs_scored: local.pairs_scored + remote.pairs_scored,
        ..local
    }
}

/// Runs `f` on the non-NULL inputs only and puts its results back in input order, NULL where the input was NULL.
pub fn skip_nulls<T>(inputs: &[Option<&str>], f: impl FnOnce(&[&str]) -> Vec<T>) -> Vec<Option<T>> {
    let present: Vec<&str> = inputs.iter().flatten().copied().collect();
    let mut results = f(&present).into_iter();
    inputs.iter().map(|t| t.and_then(|_| results.next())).collect()
}

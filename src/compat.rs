//! Functions of older SQL APIs whose symbols this library keeps. A database stays at its old version between
//! the install of a new library and `ALTER EXTENSION pg_feedback UPDATE`, and its old functions call these by
//! symbol name. Newer versions replace them in SQL (`sql = false`: no SQL is generated for them), so they keep
//! their old behaviour: 0.1.0's the model named by `pg_feedback.embedding_model` and text ids, 0.3.0's
//! `_fb_rank`, 0.7.0's `_fb_segments` (always the windows its decisions were fitted with), 0.7.0-0.11.0's
//! `_fb_decide` (no input vector: scored without a decision's gate).

use feedback_core::model::TextRole;
use feedback_core::note;
use pgrx::prelude::*;

use crate::{gucs, host};

fn role(query: bool) -> TextRole {
    if query {
        TextRole::Query
    } else {
        TextRole::Document
    }
}

#[pg_extern(sql = false)]
fn _fb_embed(text: &str, query: bool) -> Vec<f32> {
    if query {
        host::embed_query(&gucs::embedding_model(), text)
    } else {
        host::embed(&gucs::embedding_model(), &[text], TextRole::Document).pop().unwrap_or_default()
    }
}

#[pg_extern(sql = false)]
fn _fb_embed_batch(texts: Array<&str>, query: bool) -> SetOfIterator<'static, Option<Vec<f32>>> {
    let inputs: Vec<Option<&str>> = texts.iter().collect();
    let model = gucs::embedding_model();
    SetOfIterator::new(host::skip_nulls(&inputs, |present| host::embed(&model, present, role(query))))
}

#[pg_extern(sql = false)]
fn fb_embedding_model() -> String {
    gucs::embedding_model()
}

#[pg_extern(sql = false)]
fn fb_note_id(task_type: &str, lesson: &str, correction: &str) -> String {
    note::note_id(task_type, lesson, correction)
}

#[pg_extern(sql = false)]
fn fb_models() -> TableIterator<
    'static,
    (
        name!(name, String),
        name!(kind, String),
        name!(dimensions, i32),
        name!(pooling, Option<String>),
        name!(query_prefix, String),
        name!(max_tokens, i32),
        name!(source, String),
    ),
> {
    let rows = crate::embed::installed_rows();
    TableIterator::new(rows.into_iter().map(|(name, kind, dims, pooling, prefix, max_tokens, _, _, source)| {
        (name, kind, dims, pooling, prefix, max_tokens, source)
    }))
}

/// 0.7.0-0.10.0's segments: a diff's post-image and up to 8 windows of lines, what their decisions read.
#[pg_extern(immutable, strict, parallel_safe, sql = false)]
fn _fb_segments(query: &str) -> Vec<String> {
    crate::decide::segments_of(query, crate::decide::LEGACY_SEGMENTS as usize)
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// 0.3.0's ranking (fb_retrieve before the relative cut): near ties judged on the cross-encoder's sigmoid.
#[pg_extern(immutable, parallel_safe, sql = false)]
fn _fb_rank(
    scores: Vec<Option<f32>>,
    created_at: Vec<Option<pgrx::datum::TimestampWithTimeZone>>,
    floor: f32,
    logits: bool,
    final_k: i32,
) -> Vec<i32> {
    use feedback_core::rank::{rank, Scored};
    let scale = |x: f32| if logits { sigmoid(x) } else { x };
    let micros = |t: &Option<pgrx::datum::TimestampWithTimeZone>| t.map(|t| t.into_inner()).unwrap_or(i64::MIN);
    let candidates: Vec<Scored> = scores
        .iter()
        .zip(&created_at)
        .map(|(s, t)| Scored { score: s.map(scale).unwrap_or(f32::NEG_INFINITY), created_at: micros(t) })
        .collect();
    // 0.3.0's default margin: pg_feedback.tie_margin now means a cosine margin.
    rank(&candidates, scale(floor), 0.02, final_k.max(0) as usize).into_iter().map(|i| i as i32 + 1).collect()
}

#[pg_extern(sql = false)]
#[allow(clippy::too_many_arguments)]
fn _fb_decide(
    query: &str,
    docs: Vec<Option<String>>,
    contexts: Vec<Option<String>>,
    cosines: Vec<Option<f32>>,
    segment_cosines: Vec<Option<f32>>,
    n_segments: i32,
    decision: pgrx::JsonB,
) -> Vec<f32> {
    crate::decide::decide(query, docs, contexts, cosines, segment_cosines, n_segments, decision, None)
}

//! Functions of the 0.1.0 SQL API whose symbols this library keeps. A database stays at 0.1.0 between the
//! install of a new library and `ALTER EXTENSION pg_feedback UPDATE`, and its 0.1.0 functions call these by
//! symbol name. 0.2.0 replaces them in SQL (`sql = false`: no SQL is generated for them), so they keep their
//! 0.1.0 behaviour: the model named by `pg_feedback.embedding_model`, text ids.

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

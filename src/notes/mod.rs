//! Note identity and the server's cleaning of a submitted note, called by the triggers in `sql/notes.sql`.

use feedback_core::{guard, note};
use pgrx::prelude::*;
use pgrx::JsonB;

use crate::error::FbError;
use crate::gucs;
use crate::host::check_size;

pub mod conflict;

/// `pg_feedback.review` (flagged | all | off), read through the library so that the setting is defined (and a
/// placeholder a non-superuser set before the library was loaded has been discarded) when the trigger reads it.
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_review_mode() -> String {
    gucs::review().as_str().to_string()
}

/// `pg_feedback.restore_mode`, read through the library (see `_fb_review_mode`).
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_restore_mode() -> bool {
    gucs::restore_mode()
}

/// A note's content hash (see `feedback_core::note` for the normalisation): what makes a re-submission of the
/// same correction find the stored note. `tenant` NULL: a shared note.
#[pg_extern(immutable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn fb_content_hash(
    task_type: Option<&str>,
    lesson: Option<&str>,
    correction: Option<&str>,
    tenant: default!(Option<&str>, "NULL"),
) -> Option<String> {
    let tenant = tenant.map(note::normalize_text).filter(|t| !t.is_empty());
    Some(note::note_id_for(tenant.as_deref(), task_type?, lesson?, correction?))
}

/// Text as notes store names and short fields: Unicode whitespace and control characters trimmed, inner runs
/// collapsed to one space. The one normalisation SQL uses (instead of btrim, which trims spaces only).
#[pg_extern(immutable, strict, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_normalize(text: &str) -> String {
    note::normalize_text(text)
}

/// The text a note is embedded from: `"task_type: lesson"`, normalised.
#[pg_extern(immutable, strict, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn fb_document_text(task_type: &str, lesson: &str) -> String {
    note::document_text(task_type, lesson)
}

/// A submitted note as the server stores it: required fields present and within pg_feedback.max_input_bytes,
/// secrets redacted in every text field (task_type too, each redaction recorded), task_type normalised, the id
/// hashed from the redacted content (and tenant), lesson and correction screened for instructions. The source is
/// cleaned by `_fb_clean_field`. STABLE: the size limit is a setting.
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
#[allow(clippy::type_complexity)]
fn _fb_clean_note(
    task_type: Option<&str>,
    wrong_answer: Option<&str>,
    correction: Option<&str>,
    lesson: Option<&str>,
    tenant: Option<&str>,
) -> TableIterator<
    'static,
    (
        name!(task_type, String),
        name!(wrong_answer, String),
        name!(correction, String),
        name!(lesson, String),
        name!(content_hash, String),
        name!(redactions, Vec<String>),
        name!(screening, JsonB),
        name!(tenant, Option<String>),
    ),
> {
    let fields = [("task_type", task_type), ("lesson", lesson), ("correction", correction)];
    for (name, value) in fields {
        if value.is_none_or(|v| note::normalize_text(v).is_empty()) {
            FbError::invalid_argument(
                format!("a feedback note needs a non-empty {name}"),
                "task_type, lesson and correction are required; wrong_answer may be empty.",
            )
            .report();
        }
    }
    let (task_type, lesson, correction) = (task_type.unwrap_or(""), lesson.unwrap_or(""), correction.unwrap_or(""));
    let wrong_answer = wrong_answer.unwrap_or("");
    let fields = [("task_type", task_type), ("wrong_answer", wrong_answer), ("correction", correction)];
    for (name, value) in fields.into_iter().chain([("lesson", lesson)]) {
        check_size(name, value);
    }

    let mut kinds: Vec<String> = Vec::new();
    let mut clean = |text: &str| {
        let r = guard::redact(text);
        kinds.extend(r.kinds.iter().map(|k| k.to_string()));
        r.text
    };
    let (wrong_answer, correction, lesson) = (clean(wrong_answer), clean(correction), clean(lesson));
    let task_type = note::normalize_task_type(&clean(task_type));
    kinds.sort();
    kinds.dedup();
    let tenant = tenant.map(note::normalize_text).filter(|t| !t.is_empty());
    let id = note::note_id_for(tenant.as_deref(), &task_type, &lesson, &correction);
    // Every field a prompt or a reviewer shows, each alone and lesson + correction together (an instruction can be
    // split across them): rules and the learned detector.
    let fields = [
        ("task_type", task_type.as_str()),
        ("lesson", &lesson),
        ("correction", &correction),
        ("wrong_answer", &wrong_answer),
    ];
    let findings: Vec<serde_json::Value> = guard::screen_note(&fields)
        .iter()
        .flat_map(|(field, f)| crate::guard::findings_json(std::slice::from_ref(f), Some(field)))
        .collect();
    TableIterator::once((
        task_type,
        wrong_answer,
        correction,
        lesson,
        id,
        kinds,
        JsonB(serde_json::Value::Array(findings)),
        tenant,
    ))
}

/// A task_type as notes store it: whitespace trimmed and collapsed (Unicode, control characters too), lower case
/// independent of the collation. The one normalisation every lookup by task_type uses; a blank one is refused.
#[pg_extern(immutable, strict, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_task_type(task_type: &str) -> String {
    let normalized = note::normalize_task_type(task_type);
    if normalized.is_empty() {
        FbError::invalid_argument(
            "task_type is blank",
            "Name the kind of task, e.g. sql_injection_scan: whitespace and control characters alone are no task_type.",
        )
        .report();
    }
    normalized
}

//! Note identity, exposed to the SQL triggers in `sql/notes.sql`.

use feedback_core::note;
use pgrx::prelude::*;

/// The content-hashed id of a note (see `feedback_core::note` for the normalisation).
#[pg_extern(immutable, strict, parallel_safe)]
fn fb_note_id(task_type: &str, lesson: &str, correction: &str) -> String {
    note::note_id(task_type, lesson, correction)
}

/// The text a note is embedded from: `"task_type: lesson"`, normalised.
#[pg_extern(immutable, strict, parallel_safe)]
fn fb_document_text(task_type: &str, lesson: &str) -> String {
    note::document_text(task_type, lesson)
}

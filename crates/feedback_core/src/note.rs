//! A note's identity: the sha256 of its normalised content, so submitting the same correction twice names the
//! same row.
//!
//! Normalisation, applied to each part before hashing:
//! - `task_type`: trimmed and lower-cased;
//! - `lesson` and `correction`: trimmed, every run of whitespace (spaces, tabs, newlines) collapsed to one space.
//!
//! The id is the lowercase hex sha256 of `task_type`, `lesson` and `correction`, joined by the unit separator
//! (U+001F). `wrong_answer`, `source` and timestamps are not part of the identity: the same lesson reported
//! again from another source is the same note.

use crate::model::sha256_hex;

/// Trims and collapses whitespace runs to single spaces.
pub fn normalize_text(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub fn normalize_task_type(task_type: &str) -> String {
    task_type.trim().to_lowercase()
}

/// The content-hashed id of a note.
pub fn note_id(task_type: &str, lesson: &str, correction: &str) -> String {
    let content = format!(
        "{}\u{1f}{}\u{1f}{}",
        normalize_task_type(task_type),
        normalize_text(lesson),
        normalize_text(correction)
    );
    sha256_hex(content.as_bytes())
}

/// The text a note is embedded from: `"task_type: lesson"`.
pub fn document_text(task_type: &str, lesson: &str) -> String {
    format!("{}: {}", normalize_task_type(task_type), normalize_text(lesson))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_and_case_of_task_type_do_not_change_the_id() {
        let a = note_id("sql_injection_scan", "Use bound parameters.", "Replace concat with $1.");
        let b = note_id("  SQL_Injection_Scan ", " Use   bound\nparameters. ", "Replace concat\twith $1.");
        assert_eq!(a, b);
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn content_changes_change_the_id() {
        let a = note_id("t", "lesson", "correction");
        assert_ne!(a, note_id("t", "lesson!", "correction"));
        assert_ne!(a, note_id("t", "lesson", "correction!"));
        assert_ne!(a, note_id("u", "lesson", "correction"));
        // The separator keeps parts from running into each other.
        assert_ne!(note_id("t", "ab", "c"), note_id("t", "a", "bc"));
    }

    #[test]
    fn document_text_is_task_type_colon_lesson() {
        assert_eq!(document_text(" Perf_Review", "Avoid  N+1 queries."), "perf_review: Avoid N+1 queries.");
    }
}

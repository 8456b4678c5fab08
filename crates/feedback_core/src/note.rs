//! A note's identity: the sha256 of its normalised content, so submitting the same correction twice names the
//! same row.
//!
//! Normalisation, applied to each part before hashing:
//! - `task_type`: trimmed and lower-cased;
//! - `lesson` and `correction`: trimmed, every run of whitespace (spaces, tabs, newlines) collapsed to one space.
//!
//! The id is the lowercase hex sha256 of `task_type`, `lesson` and `correction`, joined by the unit separator
//! (U+001F), followed by the tenant when the note belongs to one. `wrong_answer`, `source` and timestamps are not
//! part of the identity: the same lesson reported again from another source is the same note.

use crate::model::sha256_hex;

/// Trims and collapses whitespace runs to single spaces; other control characters count as whitespace, so no
/// part of a note can contain the separator its id is hashed with.
pub fn normalize_text(text: &str) -> String {
    text.split(|c: char| c.is_whitespace() || c.is_control()).filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ")
}

pub fn normalize_task_type(task_type: &str) -> String {
    normalize_text(task_type).to_lowercase()
}

/// The content-hashed id of a shared note.
pub fn note_id(task_type: &str, lesson: &str, correction: &str) -> String {
    note_id_for(None, task_type, lesson, correction)
}

/// The content-hashed id of a note of `tenant` (None: shared). Shared notes keep the three-part hash, so their
/// ids do not depend on whether tenants are in use; two tenants' identical notes are two notes.
pub fn note_id_for(tenant: Option<&str>, task_type: &str, lesson: &str, correction: &str) -> String {
    let mut content = format!(
        "{}\u{1f}{}\u{1f}{}",
        normalize_task_type(task_type),
        normalize_text(lesson),
        normalize_text(correction)
    );
    if let Some(tenant) = tenant {
        content.push('\u{1f}');
        content.push_str(&normalize_text(tenant));
    }
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
    fn tenants_have_their_own_ids_and_shared_ids_are_unchanged() {
        let shared = note_id("t", "lesson", "correction");
        assert_eq!(note_id_for(None, "t", "lesson", "correction"), shared);
        let a = note_id_for(Some("team_a"), "t", "lesson", "correction");
        assert_ne!(a, shared);
        assert_ne!(a, note_id_for(Some("team_b"), "t", "lesson", "correction"));
    }

    #[test]
    fn a_separator_inside_a_part_cannot_forge_another_notes_id() {
        let tenants = note_id_for(Some("team_b"), "t", "lesson", "X");
        assert_ne!(note_id("t", "lesson", "X\u{1f}team_b"), tenants);
        assert_eq!(note_id("t", "lesson", "X\u{1f}team_b"), note_id("t", "lesson", "X team_b"));
    }

    #[test]
    fn document_text_is_task_type_colon_lesson() {
        assert_eq!(document_text(" Perf_Review", "Avoid  N+1 queries."), "perf_review: Avoid N+1 queries.");
    }
}

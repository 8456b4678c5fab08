//! The guard for untrusted note text: prompt-injection screening and secret redaction, both plain Rust.
//!
//! - [`screen`]: findings for text that tries to steer the model (instruction overrides in several languages,
//!   verdicts and output templates stated in advance, role and fence markers, obfuscation, base64-wrapped
//!   attacks, exfiltration, tool calls and shell pipes), from hand rules and a learned detector
//!   ([`learned`], family `learned`). Any finding means the note is held for review; an empty list means clean.
//!   Matching runs on [`normalize_for_screening`]'s output (escapes and entities decoded, NFKD without
//!   combining marks, invisibles removed, hidden tag text decoded, look-alike letters folded).
//!   [`screen_rules`] is the hand rules alone.
//! - [`screen_note`]: a note's fields screened one by one and the lesson and correction joined, each finding
//!   tagged with its field (`lesson+correction` when only the join shows it).
//! - [`redact`]: every recognised secret replaced by `[REDACTED:<kind>]`; everything else byte for byte.
//!   Idempotent: redacting redacted text changes nothing.
//!
//! Both are precise rather than eager: a benign code-review lesson that *talks about* injection, secrets or
//! `curl | sh` should pass; the patterns are verb + object phrases, command lines with real URLs, values that
//! look random, and not single words.

mod redact;
mod screen;

pub use redact::{redact, Redacted};
pub use screen::{
    learned, normalize_for_screening, screen, screen_note, screen_note_with, screen_rules, screen_with, JOINED_FIELD,
};

/// How strongly a finding suggests an attack. Every finding holds the note; severity orders review.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Low,
    Medium,
    High,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }
}

/// One screening hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The rule's name, e.g. `ignore_previous` or `ignore_previous.de`.
    pub rule: &'static str,
    /// One of `override`, `steering`, `role_marker`, `obfuscation`, `base64`, `exfiltration`, `tool_call`,
    /// `learned`.
    pub family: &'static str,
    pub severity: Severity,
    /// The matched text after normalisation, at most [`SPAN_MAX_CHARS`] characters (then cut with `…`). A
    /// learned finding's span starts with its probability: `p=0.93: ...`.
    pub span: String,
}

/// Longest span kept in a [`Finding`], in characters (including the trailing `…` when cut).
pub const SPAN_MAX_CHARS: usize = 120;

/// `s` cut to at most `max` characters on a char boundary, ending in `…` when cut.
pub(crate) fn truncate_span(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severity_names() {
        assert_eq!(Severity::Low.as_str(), "low");
        assert_eq!(Severity::Medium.as_str(), "medium");
        assert_eq!(Severity::High.as_str(), "high");
        assert!(Severity::High > Severity::Low);
    }

    #[test]
    fn spans_are_cut_on_char_boundaries() {
        assert_eq!(truncate_span("short", 120), "short");
        let long = "é".repeat(200);
        let cut = truncate_span(&long, 120);
        assert_eq!(cut.chars().count(), 120);
        assert!(cut.ends_with('…'));
    }
}

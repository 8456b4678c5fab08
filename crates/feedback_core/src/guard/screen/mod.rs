//! Prompt-injection screening.
//!
//! The text is first normalised ([`normalize_for_screening`]): Unicode TAG characters are decoded and their
//! hidden text appended on its own line, invisible characters (zero-width, bidi controls, soft hyphen,
//! variation selectors, ...) are removed, decorative combining marks ("Zalgo") are dropped, NFKC folds
//! full-width and styled letters, curly quotes and dashes become ASCII, emphasis marks (`*`, backticks) go,
//! Cyrillic/Greek/Armenian look-alikes inside Latin words become Latin, and whitespace runs collapse.
//!
//! Rules then match case-insensitively. Most are verb + object phrases ("ignore" + "previous" +
//! "instructions"); a few have a context check on top: not negated ("never report the code as safe" is a
//! lesson, not an attack), universal ("report *everything* as safe"), not scoped ("don't flag vulnerabilities
//! *in test fixtures*" is a reviewer's lesson), a real destination for exfiltration phrases.
//!
//! Families: `override` (instruction overrides in en de fr es it pt nl ru zh ja pl ko, plus the common phrasing
//! in uk tr ar hi vi id sv/da/no cs el he), `role_marker` (fences, chat-template tokens, turn prefixes),
//! `obfuscation` (tag characters, bidi overrides, zero-width characters inside words, mixed-script words,
//! leetspeak, spelled-out, reversed and ROT13 attack words, hex / `\x` / `%` / `&#` encoded payloads),
//! `base64` (a blob that decodes to text that itself screens as an attack), `exfiltration` (markdown images and
//! URLs carrying placeholders, "send the conversation to ..."), `tool_call` (shell pipes from a URL, reverse
//! shells, `rm -rf /`, PowerShell download-and-run, tool-call markup and JSON).
//!
//! Cost: each rule declares a few lower-case needles with its pattern (see [`rules`]); a rule's regex runs only when the lower-cased
//! text contains one, so a benign note runs a handful of the ~110 rules. Patterns written in ASCII use ASCII
//! word boundaries, which keep the regex crate on its fast DFA for non-ASCII text.
//!
//! Modules: [`normalize`] (the text rules see), [`rules`] (the phrase rules, each with its prefilter needles and
//! context check), [`detectors`] (views that are not one regex: URLs, leetspeak, spelled-out, reversed and
//! ROT13 words, encoded and base64 payloads).

mod detectors;
pub mod learned;
mod normalize;
mod rules;
#[cfg(test)]
mod tests;

use super::{truncate_span, Finding, Severity, SPAN_MAX_CHARS};
pub(crate) use detectors::B64_STANDARD;
use detectors::{
    base64_payloads, escaped_payloads, exfiltration_urls, leetspeak, raw_obfuscation, reversed_or_rot13, spaced_letters,
};
pub use normalize::normalize_for_screening;
use normalize::{decode_escapes, normalize};
use rules::RULES;

pub(crate) const OVERRIDE: &str = "override";
pub(crate) const ROLE_MARKER: &str = "role_marker";
pub(crate) const OBFUSCATION: &str = "obfuscation";
pub(crate) const BASE64: &str = "base64";
pub(crate) const EXFILTRATION: &str = "exfiltration";
pub(crate) const TOOL_CALL: &str = "tool_call";
pub(crate) const STEERING: &str = "steering";

/// How deep base64 inside base64 is followed.
const MAX_DEPTH: usize = 2;
/// At most this many base64 candidates are decoded per text (bounds the cost of hostile input).
const MAX_BASE64_CANDIDATES: usize = 16;

// ---------------------------------------------------------------------------------------------------------
// Screening
// ---------------------------------------------------------------------------------------------------------

/// Screens one text with the hand rules and the learned detector. An empty list means clean; any finding means
/// the note should be held for review. Findings of `text`, one per family and matched span (the first rule that
/// matched names it); a learned finding (family `learned`) carries its probability at the start of its span
/// (`p=0.97: ...`).
pub fn screen(text: &str) -> Vec<Finding> {
    screen_with(text, learned::shipped())
}

/// [`screen`] without the learned detector: the hand rules and the obfuscation detectors only.
pub fn screen_rules(text: &str) -> Vec<Finding> {
    screen_with(text, None)
}

/// [`screen`] with another learned model (or none): for evaluating models that are not shipped.
pub fn screen_with(text: &str, model: Option<&learned::Model>) -> Vec<Finding> {
    let mut out = Vec::new();
    // Escapes can spell tag characters, bidi controls and zero-width characters too: look at the decoded text.
    raw_obfuscation(&decode_escapes(text).0, &mut out);
    let n = normalize(text);
    scan(&n.text, 0, &mut out);
    // One look-alike word is often a lesson about homoglyphs ('rеquests' with a Cyrillic е); report it when
    // the folded text screens as an attack or when several words mix scripts.
    if let Some(word) = &n.mixed_script {
        if !out.is_empty() || n.mixed_words >= 3 {
            push(&mut out, "mixed_script_word", OBFUSCATION, Severity::Medium, word);
        }
    }
    if n.decoded_escapes >= 3 && !out.is_empty() {
        // Instruction-like text that arrived escaped: say so (the finding above names the decoded words).
        let first = out[0].span.clone();
        push(&mut out, "escaped_text", OBFUSCATION, Severity::High, &first);
    }
    // The learned detector judges sentences, not phrases: short lessons ("Avoid N+1 queries.") are terse
    // imperatives, which its training texts (whole attempts) rarely are, and scored near its threshold. Short texts
    // get the rules only; an instruction split over short fields is read in the joined lesson + correction.
    if n.text.split_whitespace().count() >= LEARNED_MIN_WORDS {
        if let Some(f) = model.and_then(|m| m.finding(&n.text)) {
            out.push(f);
        }
    }
    out
}

/// Fewest words of a text the learned detector scores.
pub const LEARNED_MIN_WORDS: usize = 8;

/// The field name of findings that only the joined lesson and correction show.
pub const JOINED_FIELD: &str = "lesson+correction";

/// Screens a note's fields (`("lesson", ...)`, `("correction", ...)`, `("wrong_answer", ...)`, ...): each field
/// alone, then the lesson and the correction joined (both orders), since an instruction can be split across them
/// and the prompt shows them together. Each finding is tagged with its field; a finding of the joined text whose
/// rule no single field already reported is tagged [`JOINED_FIELD`].
pub fn screen_note(fields: &[(&str, &str)]) -> Vec<(String, Finding)> {
    screen_note_with(fields, learned::shipped())
}

/// [`screen_note`] with another learned model (or none).
pub fn screen_note_with(fields: &[(&str, &str)], model: Option<&learned::Model>) -> Vec<(String, Finding)> {
    let mut out: Vec<(String, Finding)> = Vec::new();
    for (name, text) in fields {
        if !text.trim().is_empty() {
            // Identifiers (`sql_injection_scan`) are too short for the learned detector: rules only.
            let model = if learned::free_text(text) { model } else { None };
            out.extend(screen_with(text, model).into_iter().map(|f| (name.to_string(), f)));
        }
    }
    for joined in learned::joined_fields(fields) {
        {
            for f in screen_with(&joined, model) {
                if !out.iter().any(|(_, g)| g.rule == f.rule) {
                    out.push((JOINED_FIELD.to_string(), f));
                }
            }
        }
    }
    out
}

pub(super) fn push(out: &mut Vec<Finding>, rule: &'static str, family: &'static str, severity: Severity, span: &str) {
    let span = truncate_span(span.trim(), SPAN_MAX_CHARS);
    // One finding per family and span: several rules of a family often match the same words, and a reviewer
    // needs to see each suspicious span once.
    if !out.iter().any(|f| (f.rule == rule || f.family == family) && f.span == span) {
        out.push(Finding { rule, family, severity, span });
    }
}

/// The match opens a quotation that closes later on the same line: the note mentions the phrase.
fn quoted(text: &str, start: usize, end: usize) -> bool {
    let Some(open) = text[..start].chars().next_back() else { return false };
    if !matches!(open, '\'' | '"') {
        return false;
    }
    let tail = &text[end..];
    let line = tail.split('\n').next().unwrap_or("");
    line.char_indices().take_while(|(i, _)| *i <= 80).any(|(_, c)| c == open)
}

pub(super) fn scan(text: &str, depth: usize, out: &mut Vec<Finding>) {
    let lower = text.to_lowercase().replace('\n', " ");
    for rule in RULES.iter() {
        if !rule.prefilter.iter().any(|n| lower.contains(n.as_str())) {
            debug_assert!(
                !rule.re.is_match(text),
                "guard rule {} matched {text:?} without any of its needles",
                rule.name
            );
            continue;
        }
        for m in rule.re.find_iter(text) {
            if rule.family == OVERRIDE && quoted(text, m.start(), m.end()) {
                continue; // a lesson quoting an attack phrase ("payloads like 'ignore previous instructions'")
            }
            if rule.check.is_none_or(|check| check(text, m.start(), m.end())) {
                push(out, rule.name, rule.family, rule.severity, m.as_str());
                break;
            }
        }
    }
    exfiltration_urls(text, out);
    leetspeak(text, out);
    spaced_letters(text, out);
    reversed_or_rot13(text, out);
    if depth < MAX_DEPTH {
        base64_payloads(text, depth, out);
        escaped_payloads(text, depth, out);
    }
}

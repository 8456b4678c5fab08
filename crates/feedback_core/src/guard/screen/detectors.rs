//! Detectors that are not one phrase regex: raw-text obfuscation, exfiltration URLs, leetspeak, spelled-out,
//! reversed and ROT13 words, hex / escape / base64 payloads (decoded and screened again).

use std::sync::LazyLock;

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use regex::Regex;

use super::normalize::{bidi_control, invisible, normalize, tag_char, word_splitter};
use super::rules::{after, before, compile};
use super::{push, scan, BASE64, EXFILTRATION, MAX_BASE64_CANDIDATES, OBFUSCATION};
use crate::guard::{Finding, Severity};

/// Findings on the raw text: hidden tag text, bidi overrides, zero-width characters splitting words.
pub(super) fn raw_obfuscation(text: &str, out: &mut Vec<Finding>) {
    if text.chars().any(tag_char) {
        let hidden: String = text
            .chars()
            .filter(|&c| ('\u{E0020}'..='\u{E007E}').contains(&c))
            .map(|c| char::from((c as u32 - 0xE0000) as u8))
            .collect();
        let span = if hidden.is_empty() { "(unicode tag characters)".to_string() } else { hidden };
        push(out, "unicode_tag_chars", OBFUSCATION, Severity::High, &span);
    }
    if let Some(i) = text.find(bidi_control) {
        push(out, "bidi_control", OBFUSCATION, Severity::High, &context_span(text, i));
    }
    let chars: Vec<char> = text.chars().collect();
    let mut splits = 0;
    let mut first = None;
    let mut i = 1;
    while i + 1 < chars.len() {
        if word_splitter(chars[i]) {
            let mut j = i;
            while j < chars.len() && word_splitter(chars[j]) {
                j += 1;
            }
            if j < chars.len() && chars[i - 1].is_alphabetic() && chars[j].is_alphabetic() {
                splits += 1;
                first.get_or_insert(i);
            }
            i = j;
        } else {
            i += 1;
        }
    }
    if splits >= 2 {
        let start = first.unwrap_or(0).saturating_sub(20);
        let span: String = chars[start..].iter().filter(|c| !invisible(**c)).take(60).collect();
        push(out, "zero_width_in_words", OBFUSCATION, Severity::Medium, &span);
    }
}

fn context_span(text: &str, at: usize) -> String {
    let s = before(text, at, 30);
    let e = after(text, at, 60);
    format!("{s}{e}").chars().filter(|&c| !invisible(c)).collect()
}

static MD_IMAGE: LazyLock<Regex> = LazyLock::new(|| compile(r"!\[[^\]\n]*\]\([ \n]*<?([^)\n]+)\)"));
static URL: LazyLock<Regex> = LazyLock::new(|| compile(r"\b(?:https?|ftp)://(?:[^ \n\x22'<>]|<[^ \n<>]{1,40}>)+"));
static PLACEHOLDER: LazyLock<Regex> = LazyLock::new(|| {
    compile(
        r"\{\{|\$\{|\{[^{}]*\}|\[(?-i:[A-Z_ ]{3,})\]|\[[^\]]*(?:secret|key|token|passw|conversation|chat|history|prompt|message|context|summary|data|input|creds|credential|cookie|session)[^\]]*\]|\$\{?[a-z_]\w*|%s\b|%\(\w+\)s|<[^>]*>|\b(?:insert|your|put)_[a-z_]+\b",
    )
});
static PATH_PLACEHOLDER: LazyLock<Regex> = LazyLock::new(|| {
    compile(
        r"\{\{|[{$][^}/]*(?:secret|key|token|passw|conversation|chat|history|prompt|message|context|summary|creds|credential|cookie|session|payload|leak|exfil|data|env)",
    )
});

/// A URL carrying a template placeholder: anywhere in the query/fragment, or in the path when it is
/// `{{...}}` or names data (`{secret}`, `$TOKEN`).
fn url_placeholder(url: &str) -> bool {
    let url = url.trim_end_matches(['.', ',', ';', ':', ')', '!', '?']);
    let after_scheme = url.split_once("://").map_or(url, |(_, r)| r);
    let (hostpath, query) = match after_scheme.find(['?', '#']) {
        Some(i) => (&after_scheme[..i], Some(&after_scheme[i + 1..])),
        None => (after_scheme, None),
    };
    let path = hostpath.find('/').map_or("", |i| &hostpath[i..]);
    query.is_some_and(|q| PLACEHOLDER.is_match(q)) || PATH_PLACEHOLDER.is_match(path)
}

pub(super) fn exfiltration_urls(text: &str, out: &mut Vec<Finding>) {
    if !text.contains("//") {
        return;
    }
    for caps in MD_IMAGE.captures_iter(text) {
        let whole = caps.get(0).map_or("", |m| m.as_str());
        let target = caps.get(1).map_or("", |m| m.as_str()).trim();
        let url = target.split_whitespace().next().unwrap_or("");
        let off_site = url.starts_with("http://") || url.starts_with("https://") || url.starts_with("//");
        if off_site && url_placeholder(target) {
            push(out, "markdown_image_placeholder", EXFILTRATION, Severity::High, whole);
        } else if off_site && url.split_once('?').is_some_and(|(_, q)| !q.is_empty()) {
            push(out, "markdown_image_query", EXFILTRATION, Severity::Medium, whole);
        }
    }
    for m in URL.find_iter(text) {
        if url_placeholder(m.as_str()) {
            push(out, "url_placeholder", EXFILTRATION, Severity::High, m.as_str());
            break;
        }
    }
}

/// Attack vocabulary that leetspeak spells with digits: `1gn0r3 4ll pr3v10u5 1n57ruc710n5`.
const LEET_WORDS: &[&str] = &[
    "ignore",
    "disregard",
    "forget",
    "previous",
    "prior",
    "above",
    "all",
    "instructions",
    "instruction",
    "rules",
    "system",
    "prompt",
    "override",
    "bypass",
    "jailbreak",
    "secure",
    "safe",
    "approve",
    "everything",
    "reveal",
    "secret",
    "secrets",
    "password",
    "admin",
    "execute",
    "command",
    "unrestricted",
    "developer",
    "mode",
];

fn leet_fold(word: &str, one: char) -> String {
    word.chars()
        .map(|c| match c {
            '0' => 'o',
            '1' | '|' => one,
            '3' => 'e',
            '4' | '@' => 'a',
            '5' | '$' => 's',
            '7' => 't',
            '8' => 'b',
            '9' => 'g',
            '!' => 'i',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// Two or more words spelled with digits that decode to attack vocabulary.
pub(super) fn leetspeak(text: &str, out: &mut Vec<Finding>) {
    let mut hits = Vec::new();
    let mut with_letters = false;
    for token in text.split(|c: char| c.is_whitespace() || matches!(c, ',' | '.' | ';' | ':' | '(' | ')' | '"' | '\''))
    {
        if !token.chars().any(|c| c.is_ascii_digit() || matches!(c, '@' | '$' | '|' | '!')) || token.len() < 3 {
            continue;
        }
        if !token.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '@' | '$' | '|' | '!')) {
            continue;
        }
        if LEET_WORDS.contains(&leet_fold(token, 'i').as_str()) || LEET_WORDS.contains(&leet_fold(token, 'l').as_str())
        {
            with_letters |= token.chars().any(|c| c.is_ascii_alphabetic());
            hits.push(token);
        }
    }
    if hits.len() >= 2 && with_letters {
        push(out, "leetspeak", OBFUSCATION, Severity::Medium, &hits.join(" "));
    }
}

/// Distinctive attack words (five letters or more) for the spelled-out, reversed and ROT13 views.
const VOCAB: &[&str] = &[
    "ignore",
    "disregard",
    "forget",
    "previous",
    "instructions",
    "instruction",
    "system",
    "prompt",
    "override",
    "bypass",
    "jailbreak",
    "unrestricted",
    "developer",
    "approve",
    "everything",
    "reveal",
    "secrets",
    "password",
    "vulnerabilities",
    "security",
    "secure",
    "report",
    "rules",
    "above",
    "prior",
    "guidelines",
];

/// Letters spelled out one by one (`i g n o r e`, `i.g.n.o.r.e`, `i-g-n-o-r-e`) and joined back up,
/// reported when the joined text holds two or more attack words.
pub(super) fn spaced_letters(text: &str, out: &mut Vec<Finding>) {
    let mut joined = Vec::new();
    let mut run = String::new();
    let mut run_len = 0;
    let mut flush = |run: &mut String, run_len: &mut usize| {
        if *run_len >= 5 {
            joined.push(run.to_lowercase());
        }
        run.clear();
        *run_len = 0;
    };
    for token in text.split_whitespace() {
        let seps = |c: char| matches!(c, '.' | '-' | '_' | '|' | '/' | '+' | '~');
        let mut parts = token.split(seps).filter(|p| !p.is_empty()).peekable();
        let spelled = parts.peek().is_some()
            && token.split(seps).filter(|p| !p.is_empty()).all(|p| {
                let mut cs = p.chars();
                cs.next().is_some_and(char::is_alphabetic) && cs.next().is_none()
            });
        if spelled {
            for l in parts {
                run.push_str(l);
                run_len += 1;
            }
        } else {
            flush(&mut run, &mut run_len);
        }
    }
    flush(&mut run, &mut run_len);
    let all = joined.join(" ");
    let hits: Vec<&str> = VOCAB.iter().copied().filter(|w| w.len() >= 5 && all.contains(w)).collect();
    if hits.len() >= 2 {
        push(out, "spelled_out_letters", OBFUSCATION, Severity::Medium, &all);
    }
}

/// Words written backwards or in ROT13 that spell attack words.
pub(super) fn reversed_or_rot13(text: &str, out: &mut Vec<Finding>) {
    let rot13 = |c: char| match c {
        'a'..='z' => (((c as u8 - b'a' + 13) % 26) + b'a') as char,
        _ => c,
    };
    let mut reversed: Vec<&str> = Vec::new();
    let mut rotated: Vec<&str> = Vec::new();
    for token in text.split(|c: char| !c.is_ascii_alphabetic()).filter(|t| t.len() >= 5) {
        for &word in VOCAB.iter().filter(|w| w.len() == token.len()) {
            let rev = token.bytes().rev().zip(word.bytes()).all(|(a, b)| a.to_ascii_lowercase() == b);
            if rev && !reversed.contains(&word) {
                reversed.push(word);
            }
            let rot = token.chars().zip(word.chars()).all(|(a, b)| rot13(a.to_ascii_lowercase()) == b);
            if rot && !rotated.contains(&word) {
                rotated.push(word);
            }
        }
    }
    if reversed.len() >= 2 {
        push(out, "reversed_text", OBFUSCATION, Severity::Medium, &reversed.join(" "));
    }
    if rotated.len() >= 2 {
        push(out, "rot13_text", OBFUSCATION, Severity::Medium, &rotated.join(" "));
    }
}

static ESCAPED_CANDIDATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:[0-9a-fA-F]{2}){20,}|(?:\\x[0-9a-fA-F]{2}){8,}|(?:\\u[0-9a-fA-F]{4}){8,}|(?:&#x?[0-9a-fA-F]{1,6};){8,}|(?:%[0-9a-fA-F]{2}[A-Za-z0-9._~+-]{0,3}){10,}")
        .expect("escape pattern")
});

/// Hex, `\xNN`, `\uNNNN`, `&#NN;` and `%NN` runs decoded to text.
fn decode_escapes(blob: &str) -> Option<String> {
    let hex = |s: &str| u32::from_str_radix(s, 16).ok();
    let decoded = if blob.starts_with("\\u") {
        blob.split("\\u")
            .filter(|p| !p.is_empty())
            .map(|p| hex(p).and_then(char::from_u32))
            .collect::<Option<String>>()?
    } else if blob.starts_with("&#") {
        let mut s = String::new();
        for ent in blob.split(';').filter(|p| !p.is_empty()) {
            let ent = ent.trim_start_matches("&#");
            let cp = match ent.strip_prefix(['x', 'X']) {
                Some(h) => hex(h)?,
                None => ent.parse().ok()?,
            };
            s.push(char::from_u32(cp)?);
        }
        s
    } else {
        let mut bytes = Vec::new();
        let b = blob.as_bytes();
        let mut i = 0;
        let plain = !blob.contains('%') && !blob.contains("\\x");
        while i < b.len() {
            if plain && i + 1 < b.len() {
                bytes.push(u8::from_str_radix(&blob[i..i + 2], 16).ok()?);
                i += 2;
            } else if b[i] == b'%' && i + 2 < b.len() {
                bytes.push(u8::from_str_radix(&blob[i + 1..i + 3], 16).ok()?);
                i += 3;
            } else if b[i] == b'\\' && i + 3 < b.len() {
                bytes.push(u8::from_str_radix(&blob[i + 2..i + 4], 16).ok()?);
                i += 4;
            } else {
                bytes.push(if b[i] == b'+' { b' ' } else { b[i] });
                i += 1;
            }
        }
        String::from_utf8(bytes).ok()?
    };
    readable(&decoded).then_some(decoded)
}

fn readable(decoded: &str) -> bool {
    let total = decoded.chars().count();
    let printable = decoded.chars().filter(|c| !c.is_control() || c.is_whitespace()).count();
    let letters = decoded.chars().filter(|c| c.is_alphabetic()).count();
    total > 0 && printable * 100 >= total * 95 && letters * 2 >= total
}

pub(super) fn escaped_payloads(text: &str, depth: usize, out: &mut Vec<Finding>) {
    let hex_run = text.as_bytes().split(|b| !b.is_ascii_hexdigit()).any(|run| run.len() >= 40);
    if !(hex_run || text.contains("\\x") || text.contains("\\u") || text.contains("&#") || text.contains('%')) {
        return;
    }
    for m in ESCAPED_CANDIDATE.find_iter(text).take(MAX_BASE64_CANDIDATES) {
        let Some(decoded) = decode_escapes(m.as_str()) else { continue };
        let mut inner = Vec::new();
        scan(&normalize(&decoded).text, depth + 1, &mut inner);
        if let Some(first) = inner.first() {
            let span = format!("{} => {}", m.as_str(), first.span);
            push(out, "encoded_payload", OBFUSCATION, Severity::High, &span);
        }
    }
}

static BASE64_CANDIDATE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Za-z0-9+/_-]{20,}={0,2}").expect("base64 pattern"));

const LENIENT: GeneralPurposeConfig = GeneralPurposeConfig::new()
    .with_decode_padding_mode(DecodePaddingMode::Indifferent)
    .with_decode_allow_trailing_bits(true);
/// Base64 decoders that accept missing padding and trailing bits (blobs cut out of prose); redaction uses them too.
pub(crate) const B64_STANDARD: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, LENIENT);
const B64_URL_SAFE: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, LENIENT);

/// Decodes a base64 / base64url blob to readable text, if it is one.
fn decode_base64_text(blob: &str) -> Option<String> {
    let body = blob.trim_end_matches('=');
    if body.bytes().all(|b| b.is_ascii_hexdigit()) || !body.bytes().any(|b| b.is_ascii_uppercase()) {
        return None; // hex digests and lower-case identifiers are not base64 payloads
    }
    let body = if body.len() % 4 == 1 { &body[..body.len() - 1] } else { body };
    let url_safe = body.contains(['-', '_']);
    if url_safe && body.contains(['+', '/']) {
        return None;
    }
    let bytes = if url_safe { B64_URL_SAFE.decode(body) } else { B64_STANDARD.decode(body) }.ok()?;
    let decoded = String::from_utf8(bytes).ok()?;
    readable(&decoded).then_some(decoded)
}

pub(super) fn base64_payloads(text: &str, depth: usize, out: &mut Vec<Finding>) {
    for m in BASE64_CANDIDATE.find_iter(text).take(MAX_BASE64_CANDIDATES) {
        let Some(decoded) = decode_base64_text(m.as_str()) else { continue };
        let mut inner = Vec::new();
        raw_obfuscation(&decoded, &mut inner);
        scan(&normalize(&decoded).text, depth + 1, &mut inner);
        if let Some(first) = inner.first() {
            let span = format!("{} => {}", m.as_str(), first.span);
            push(out, "base64_payload", BASE64, Severity::High, &span);
        }
    }
}

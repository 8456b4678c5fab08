//! Words of a lesson as the comparison reads them: contractions opened ("don't" is "do not"), each word classed
//! (function word, number, version, identifier or plain word) and normalised for matching.

use serde::Serialize;

/// Words read per text; lessons are one or two sentences, a longer text is compared by its start.
const MAX_TOKENS: usize = 160;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Function words (the, of, to ...): aligned, never counted as content.
    Stop,
    Word,
    /// A count, size or duration (30, 30s, 1000, 5%).
    Number,
    /// A version (v2, 3.11, 1.2.0).
    Version,
    /// A code span, quoted string, dotted or snake_case or camelCase name, or a proper name (a tool, a vendor).
    Identifier,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Token {
    /// The word as written (punctuation around it stripped).
    pub raw: String,
    /// Lower-cased, suffixes stripped: what alignment matches.
    pub norm: String,
    pub class: Class,
    /// For numbers and versions: the value compared (digits and dots, unit dropped).
    #[serde(skip)]
    pub value: String,
}

impl Token {
    /// A word that carries the lesson's content: not a function word, not a negation.
    pub fn is_content(&self) -> bool {
        self.class != Class::Stop && !super::lexicon::is_negation(&self.norm)
    }
}

const STOP: &[&str] = &[
    "a", "an", "the", "of", "to", "in", "on", "at", "by", "for", "from", "with", "and", "or", "is", "are", "was",
    "were", "be", "been", "being", "it", "its", "it's", "this", "that", "these", "those", "as", "so", "do", "does",
    "did", "has", "have", "had", "will", "would", "can", "could", "should", "there", "their", "they", "them", "you",
    "your", "we", "our", "us", "if", "when", "then", "which", "who", "what", "into", "onto", "up", "out", "via", "per",
    "i", "e.g", "eg", "i.e", "ie", "etc", "get", "gets", "got", "also", "too", "yourself", "itself", "one", "s",
];

/// Lower-cased with a plural, -ing, -ed or final -e stripped (enable / enabled / enables match).
pub fn lemma(word: &str) -> String {
    let w = word.to_lowercase();
    let mut base = w.as_str();
    for suf in ["ing", "ed", "es", "s"] {
        if let Some(b) = base.strip_suffix(suf) {
            if b.chars().count() >= 3 && !base.ends_with("ss") {
                base = b;
                break;
            }
        }
    }
    let base = if base.chars().count() > 3 { base.strip_suffix('e').unwrap_or(base) } else { base };
    base.to_string()
}

fn split_contraction(word: &str) -> Option<(&str, &'static str)> {
    let lw = word.to_lowercase();
    let stem = match lw.as_str() {
        "can't" | "cannot" => "can",
        "won't" => "will",
        "shan't" => "shall",
        _ => {
            let cut = lw.strip_suffix("n't")?;
            return Some((&word[..cut.len()], "not"));
        }
    };
    Some((stem, "not"))
}

fn is_number(w: &str) -> Option<String> {
    let digits: String = w.chars().take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '.').collect();
    if digits.is_empty() || !digits.chars().next().is_some_and(|c| c.is_ascii_digit()) {
        return None;
    }
    let unit = &w[digits.len()..];
    let unit_ok = unit.is_empty()
        || unit.chars().count() <= 3 && unit.chars().all(|c| c.is_ascii_alphabetic() || c == '%')
        || ["seconds", "second", "minutes", "minute", "hours", "hour", "days", "day", "items", "rows", "times"]
            .contains(&unit.to_lowercase().as_str());
    let value = digits.trim_end_matches(['.', ',']).replace(',', "");
    (unit_ok && value.matches('.').count() <= 1).then_some(value)
}

fn is_version(w: &str) -> Option<String> {
    let lw = w.to_lowercase();
    let body = lw.strip_prefix('v').unwrap_or(&lw);
    let dotted =
        body.split('.').count() >= 2 && body.split('.').all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
    let v_number = lw.starts_with('v') && !body.is_empty() && body.chars().all(|c| c.is_ascii_digit() || c == '.');
    (v_number || dotted && body.split('.').count() >= 3 || dotted && lw.starts_with('v')).then(|| body.to_string())
}

fn is_identifier(raw: &str, sentence_start: bool, quoted: bool) -> bool {
    if quoted {
        return true;
    }
    let inner = raw.trim_end_matches("()");
    let has_code_punct = inner.chars().any(|c| "._@$#/<>=:[]{}\\".contains(c)) || raw.ends_with("()");
    // snake_case, and hyphenated names (filter-repo, py-spy, aria-label): a hyphenated word is read as a name, so
    // a changed one blocks a merge rather than passing as a rewording.
    let snake = inner.contains('_') || inner.trim_matches('-').contains('-');
    let chars: Vec<char> = inner.chars().collect();
    let camel = chars.windows(2).any(|p| p[0].is_lowercase() && p[1].is_uppercase());
    let caps = chars.len() >= 2 && chars.iter().all(|c| c.is_uppercase() || c.is_ascii_digit());
    let proper = !sentence_start && chars.first().is_some_and(|c| c.is_uppercase());
    has_code_punct || snake || camel || caps || proper
}

/// The words of a text, classed and normalised (at most [`MAX_TOKENS`]).
pub fn tokenize(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut sentence_start = true;
    for piece in text.split(|c: char| c.is_whitespace() || c == '—' || c == '–') {
        if out.len() >= MAX_TOKENS {
            break;
        }
        let quoted = piece.starts_with('`') || piece.starts_with('"') && piece.len() > 2;
        let ends_sentence = piece.ends_with('.')
            || piece.ends_with(';')
            || piece.ends_with(':')
            || piece.ends_with('!')
            || piece.ends_with('?');
        let raw = piece
            .trim_matches(|c: char| ",;:!?\"'“”‘’`()[]{}*".contains(c))
            .trim_end_matches('.')
            .trim_end_matches("'s")
            .trim_end_matches("’s");
        let raw = raw.trim_matches(|c: char| ",;:!?\"'“”‘’`()[]{}*".contains(c));
        if raw.is_empty() || !raw.chars().any(|c| c.is_alphanumeric()) {
            sentence_start |= ends_sentence;
            continue;
        }
        let raw = raw.replace('’', "'");
        let words: Vec<(String, bool)> = match split_contraction(&raw) {
            Some((base, not)) => vec![(base.to_string(), false), (not.to_string(), false)],
            None => vec![(raw.clone(), true)],
        };
        for (w, whole) in words {
            let lw = w.to_lowercase();
            let (class, value) = if let Some(v) = is_version(&w) {
                (Class::Version, v)
            } else if let Some(v) = is_number(&w) {
                (Class::Number, v)
            } else if STOP.contains(&lw.as_str()) {
                (Class::Stop, String::new())
            } else if whole && is_identifier(&w, sentence_start, quoted) {
                (Class::Identifier, String::new())
            } else {
                (Class::Word, String::new())
            };
            let norm = match class {
                Class::Identifier => lw.trim_end_matches("()").to_string(),
                Class::Number | Class::Version => value.clone(),
                _ => lemma(&lw),
            };
            out.push(Token { raw: w, norm, class, value });
        }
        sentence_start = ends_sentence;
    }
    out
}

//! The small vocabularies the comparison reads: negations, "no longer" markers, comparison and scope words,
//! bounds and the antonyms common in review lessons. Every entry is matched through [`lemma`], as tokens are.

use super::tokens::{lemma, Token};

const NEGATIONS: &[&str] = &[
    "not",
    "no",
    "never",
    "without",
    "avoid",
    "none",
    "nor",
    "neither",
    "nothing",
    "forbid",
    "forbidden",
    "disallow",
    "prohibit",
    "prohibited",
    "refuse",
    "ban",
    "banned",
];

/// Single words saying an old practice is over.
const NO_LONGER: &[&str] = &["anymore", "deprecated", "obsolete", "retired", "sunset", "discontinued", "legacy"];

const COMPARISON: &[&str] = &[
    "over",
    "instead",
    "rather",
    "than",
    "vs",
    "versus",
    "prefer",
    "preferred",
    "before",
    "after",
    "not",
    "but",
    "replace",
    "replaces",
    "favour",
    "favor",
    "unlike",
];

/// Words that restrict where a lesson applies.
const RESTRICT: &[&str] =
    &["only", "except", "unless", "solely", "exclusively", "excluding", "restrict", "restricted", "outside", "just"];
/// Words that say a lesson applies everywhere.
const UNIVERSAL: &[&str] =
    &["every", "each", "all", "any", "always", "everywhere", "anywhere", "entire", "whole", "whatever", "regardless"];

/// Bounds: a pair of these turned around changes a limit.
const BOUNDS: &[(&str, &str)] = &[
    ("least", "most"),
    ("minimum", "maximum"),
    ("min", "max"),
    ("above", "below"),
    ("more", "less"),
    ("more", "fewer"),
    ("before", "after"),
    ("earlier", "later"),
    ("higher", "lower"),
    ("longer", "shorter"),
    ("larger", "smaller"),
    ("exceed", "within"),
    ("upper", "lower"),
];

const ANTONYMS: &[(&str, &str)] = &[
    ("safe", "unsafe"),
    ("safe", "injectable"),
    ("safe", "dangerous"),
    ("secure", "insecure"),
    ("allow", "deny"),
    ("allow", "block"),
    ("allow", "reject"),
    ("allowlist", "denylist"),
    ("whitelist", "blacklist"),
    ("enable", "disable"),
    ("on", "off"),
    ("sync", "async"),
    ("synchronous", "asynchronous"),
    ("always", "never"),
    ("must", "may"),
    ("required", "optional"),
    ("mandatory", "optional"),
    ("increase", "decrease"),
    ("public", "private"),
    ("include", "exclude"),
    ("accept", "reject"),
    ("early", "late"),
    ("first", "last"),
    ("open", "close"),
    ("local", "utc"),
    ("mutable", "immutable"),
    ("lazy", "eager"),
    ("strict", "lenient"),
    ("strict", "loose"),
    ("client", "server"),
    ("true", "false"),
    ("pass", "fail"),
    ("ignore", "flag"),
    ("add", "remove"),
    ("keep", "remove"),
    ("keep", "drop"),
    ("commit", "rollback"),
    ("inner", "outer"),
    ("shallow", "deep"),
    ("valid", "invalid"),
    ("trusted", "untrusted"),
    ("internal", "external"),
    ("static", "dynamic"),
    ("global", "local"),
    ("explicit", "implicit"),
    ("relative", "absolute"),
    ("blocking", "nonblocking"),
    ("warn", "error"),
    ("tabs", "spaces"),
    ("encrypted", "plaintext"),
    ("fine", "wrong"),
    ("ok", "wrong"),
    ("good", "bad"),
    ("right", "wrong"),
    ("correct", "incorrect"),
    ("needed", "unnecessary"),
    ("necessary", "unnecessary"),
    ("recommended", "discouraged"),
    ("encourage", "discourage"),
];

fn in_list(norm: &str, list: &[&str]) -> bool {
    list.iter().any(|w| lemma(w) == norm)
}

pub fn is_negation(norm: &str) -> bool {
    in_list(norm, NEGATIONS)
}

pub fn is_comparison(norm: &str) -> bool {
    in_list(norm, COMPARISON)
}

pub fn is_restrict(norm: &str) -> bool {
    in_list(norm, RESTRICT)
}

pub fn is_universal(norm: &str) -> bool {
    in_list(norm, UNIVERSAL)
}

pub fn is_bound(word: &str) -> bool {
    let n = lemma(word);
    BOUNDS.iter().any(|(x, y)| lemma(x) == n || lemma(y) == n)
}

/// Where a text says an old practice no longer holds: "no longer", "stop <doing>", "deprecated" ..., if anywhere.
fn no_longer_at(ts: &[Token]) -> Option<usize> {
    ts.iter().enumerate().position(|(i, t)| {
        in_list(&t.norm, NO_LONGER)
            || t.norm == "no" && ts.get(i + 1).is_some_and(|n| n.norm == "longer")
            || t.norm == "stop" && ts.get(i + 1).is_some_and(|n| n.raw.ends_with("ing"))
    })
}

pub fn no_longer(ts: &[Token]) -> bool {
    no_longer_at(ts).is_some()
}

pub fn no_longer_span(ts: &[Token]) -> String {
    no_longer_at(ts)
        .map(|i| ts[i..(i + 2).min(ts.len())].iter().map(|t| t.raw.as_str()).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// A pair of opposed words (a bound or an antonym): one in `x` (deleted from `a`) or on `a`'s side only, the other
/// in `y` (inserted by `b`) or on `b`'s side only, at least one of them in the differing stretch.
pub fn opposed(x: &[Token], y: &[Token], ta: &[Token], tb: &[Token]) -> Option<(String, String)> {
    let has = |ts: &[Token], w: &str| ts.iter().find(|t| t.norm == lemma(w)).map(|t| t.raw.clone());
    for (p, q) in BOUNDS.iter().chain(ANTONYMS) {
        for (p, q) in [(p, q), (q, p)] {
            let in_hunk = has(x, p).is_some() || has(y, q).is_some();
            if !in_hunk {
                continue;
            }
            // p on a's side only, q on b's side only.
            if let (Some(pa), None, Some(qb), None) = (has(ta, p), has(tb, p), has(tb, q), has(ta, q)) {
                return Some((pa, qb));
            }
        }
    }
    None
}

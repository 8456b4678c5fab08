//! The injection corpora, shared by `tests/injection_corpus.rs` and `examples/fit_screen.rs`.
//!
//! Fourteen authors: `project` (`data/guard/injection.jsonl`, written by the project, its rules tuned on it; one text
//! per row) and thirteen independent authors `A`, `B`, `C`, `G`, `H`, `I`, `M`, `N`, `R`, `S`, `X`, `O`, `T`
//! (`data/guard/injection/<author>.jsonl`; rows with task_type, lesson and correction). The learned detector is
//! fitted on `project`, `A`, `B` only; the rules are tuned on those and on `I` and `M`, whose misses were read for
//! 0.11.0 (after they had been measured as held-out authors); `C`, `G`, `H`, `N`, `R`, `S`, `X`, `O`, `T` are held out:
//! nothing is tuned or chosen on them.
//! The project's sample notes (`data/sample_notes.csv`) are benign everywhere; their even rows (`tune`) may be
//! fitted on, their odd rows never are.

#![allow(dead_code)]

use std::path::PathBuf;

use feedback_core::guard::learned::Example;
use serde_json::Value;

/// The authors rules and thresholds may be tuned on.
pub const TUNE_AUTHORS: [&str; 3] = ["project", "A", "B"];
/// The held-out test author the gate was set on (0.6.0).
pub const TEST_AUTHOR: &str = "C";
/// Authors the rules (not the learned detector) were tuned on after they had been measured held out: I (casual
/// chat-style attacks) and M (a quiet insider).
pub const RULE_TUNE_AUTHORS: [&str; 2] = ["I", "M"];
/// Every author nothing is tuned or chosen on: C, and G, H (written after 0.8.0), N, R, S (written for 0.11.0), X
/// (written after the rules were tuned on I and M), O and T (long-form and wiki-style notes, written for 0.12.0), each in a different
/// style, never seen by the rules or the fit.
pub const HELD_OUT_AUTHORS: [&str; 9] = ["C", "G", "H", "N", "R", "S", "X", "O", "T"];
pub const INDEPENDENT_AUTHORS: [&str; 13] = ["A", "B", "C", "G", "H", "I", "M", "N", "R", "S", "X", "O", "T"];

#[derive(Debug, Clone)]
pub struct Row {
    pub author: String,
    pub attack: bool,
    pub family: String,
    pub lang: String,
    /// (field, text): `lesson`, `correction`, `task_type`, `wrong_answer`.
    pub fields: Vec<(String, String)>,
    /// Sample notes only: fitted on (even rows) or never (odd rows).
    pub tune: bool,
}

impl Row {
    pub fn field_refs(&self) -> Vec<(&str, &str)> {
        self.fields.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect()
    }

    fn get(&self, name: &str) -> &str {
        self.fields.iter().find(|(n, _)| n == name).map_or("", |(_, t)| t.as_str())
    }

    /// The texts a model is fitted on: an attack as the lesson and correction joined (either may be harmless
    /// alone); a benign row as each free-text field and the join.
    pub fn training_texts(&self) -> Vec<(String, bool)> {
        let joined = [self.get("lesson"), self.get("correction")]
            .iter()
            .filter(|t| !t.trim().is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join("\n");
        if self.attack {
            return vec![(joined, true)];
        }
        let mut out: Vec<(String, bool)> = ["lesson", "correction", "wrong_answer"]
            .iter()
            .map(|f| self.get(f))
            .filter(|t| !t.trim().is_empty())
            .map(|t| (t.to_string(), false))
            .collect();
        if !self.get("correction").trim().is_empty() && !self.get("lesson").trim().is_empty() {
            out.push((joined, false));
        }
        out
    }
}

pub fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data")
}

fn read(path: &PathBuf) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn text_of(v: &Value, name: &str) -> String {
    v.get(name).and_then(Value::as_str).unwrap_or("").to_string()
}

/// The rows of one author (`project`, `A`, `B`, `C`, `G`, `H`, `I`).
pub fn load_author(author: &str) -> Vec<Row> {
    let path = if author == "project" {
        data_dir().join("guard/injection.jsonl")
    } else {
        data_dir().join(format!("guard/injection/{author}.jsonl"))
    };
    let text = read(&path);
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{} line {}: {e}", path.display(), i + 1));
            let attack = match v.get("label").and_then(Value::as_str) {
                Some("attack") => true,
                Some("benign") => false,
                other => panic!("{} line {}: label {other:?}", path.display(), i + 1),
            };
            let fields = if author == "project" {
                vec![("lesson".to_string(), text_of(&v, "text"))]
            } else {
                ["task_type", "lesson", "correction"].iter().map(|f| (f.to_string(), text_of(&v, f))).collect()
            };
            Row {
                author: author.to_string(),
                attack,
                family: text_of(&v, "family"),
                lang: text_of(&v, "lang"),
                fields,
                tune: false,
            }
        })
        .collect()
}

/// The benign sample notes: task_type, wrong_answer, correction, lesson.
pub fn sample_notes() -> Vec<Row> {
    let path = data_dir().join("sample_notes.csv");
    let mut reader = csv::Reader::from_path(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let headers = reader.headers().expect("csv header").clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"));
    let cols: Vec<(&str, usize)> =
        ["task_type", "wrong_answer", "correction", "lesson"].iter().map(|&n| (n, col(n))).collect();
    reader
        .records()
        .enumerate()
        .map(|(i, r)| {
            let r = r.expect("csv row");
            Row {
                author: "sample".to_string(),
                attack: false,
                family: "sample_note".to_string(),
                lang: "en".to_string(),
                fields: cols.iter().map(|&(n, c)| (n.to_string(), r[c].to_string())).collect(),
                tune: i % 2 == 0,
            }
        })
        .collect()
}

/// Training examples of `rows`, each text weighted 1.
pub fn examples(rows: &[&Row]) -> Vec<Example> {
    rows.iter().flat_map(|r| r.training_texts()).map(|(text, attack)| Example { text, attack, weight: 1.0 }).collect()
}

/// A coarse family for reporting: the authors each name families their own way.
pub fn family_group(family: &str) -> &'static str {
    let f = family.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| f.contains(w));
    if f == "sample_note" {
        "sample_note"
    } else if f == "override" {
        "override"
    } else if has(&[
        "base64",
        "base32",
        "hex",
        "encod",
        "escape",
        "entity",
        "homoglyph",
        "zero_width",
        "zalgo",
        "combining",
        "leet",
        "rot13",
        "caesar",
        "reversed",
        "spelling",
        "obfusc",
        "binary",
        "unicode",
        "fullwidth",
        "bidi",
        "acrostic",
        "invisible",
        "split",
    ]) {
        "obfuscation"
    } else if has(&[
        "exfil",
        "leak",
        "reveal",
        "system_prompt_restatement",
        "translate_system",
        "summarise_hidden",
        "repeat_words",
    ]) {
        "exfiltration"
    } else if has(&["tool", "function_call", "shell", "command"]) {
        "tool_call"
    } else if has(&[
        "role",
        "chatml",
        "inst",
        "turn",
        "template_token",
        "marker",
        "breakout",
        "fence",
        "tag",
        "header",
        "dialogue",
        "llama",
        "gemma",
        "phi_",
        "endoftext",
        "yaml",
        "toml",
        "json_role",
        "messages_array",
        "fake_",
    ]) {
        "role_marker"
    } else if has(&["output_template", "json_verdict", "template", "format", "schema", "verdict_format"]) {
        "output_template"
    } else if has(&[
        "authority",
        "consensus",
        "claim",
        "policy",
        "owner",
        "persona",
        "approval",
        "exemption",
        "allowlist",
        "trust",
        "vetted",
        "precedence",
        "priority",
        "supersede",
        "deferral",
    ]) {
        "authority_claim"
    } else if has(&[
        "suppress",
        "skip",
        "safe",
        "approve",
        "verdict",
        "merge",
        "ignore",
        "cap",
        "confidence",
        "polite",
        "checklist",
        "opt_in",
        "conditional",
        "trigger",
    ]) {
        "verdict_steering"
    } else {
        "other"
    }
}

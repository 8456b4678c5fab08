//! Development aid: reads JSON lines `{"input": "...", "docs": ["...", ...]}` on stdin and writes, per line, the
//! input's kind, its segments and each doc's lexical evidence, as `feedback_core::rank::code` computes them
//! (what fb_retrieve computes in the database), for offline experiments with the decision's features.
use std::io::{BufRead, Write};

use feedback_core::rank::code::{kind, lexical, segments, view, Segmenting};

fn main() {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line.expect("stdin");
        let v: serde_json::Value = serde_json::from_str(&line).expect("a JSON object per line");
        let input = v["input"].as_str().unwrap_or_default();
        let docs: Vec<&str> =
            v["docs"].as_array().map(|a| a.iter().filter_map(|d| d.as_str()).collect()).unwrap_or_default();
        let lex = lexical(input, &docs);
        let o = serde_json::json!({
            "kind": kind(input).as_str(),
            "view": view(input),
            "segments": segments(input, &Segmenting::default()),
            "lexical": lex.iter().map(|(s, w)| [*s, *w]).collect::<Vec<_>>(),
        });
        writeln!(out, "{o}").expect("stdout");
    }
}

//! Secret redaction measured per author, on corpora written independently of the rules.
//!
//! Authors (one JSONL file each; rows `{label: secret|clean, format, text, secrets}`):
//! - `project`: `data/guard/secrets.jsonl`, the corpus the first rules were written against (tune only);
//! - `D`: `data/guard/secrets/D.jsonl`, configuration and infrastructure (tune);
//! - `E`: `data/guard/secrets/E.jsonl`, application code: held out (see [`HELD_OUT`]);
//! - `F`: `data/guard/secrets/F.jsonl`, prose, chat and logs (tune);
//! - `J`: `data/guard/secrets/J.jsonl`, application code weighted to the hard forms: values with spaces, key bodies
//!   without headers, annotation defaults, flags in argument lists, split literals (tune; written after E's rates,
//!   never its rows, showed those forms weakest);
//! - `K`: `data/guard/secrets/K.jsonl`, .NET and JVM application code weighted to secrets in attributes and
//!   annotations and to values with spaces (tune; the same reason).
//! - `L`: `data/guard/secrets/L.jsonl`, platform and data work: code-review diffs, notebooks, SQL, CI files,
//!   infrastructure as code, shell, logs, HTTP, chat (tune; first measured as a held-out author: 0.913 redaction
//!   and 6.0% false redaction, the rules of 0.11.0 before any of its rows was read).
//! - `P`: `data/guard/secrets/P.jsonl`, mobile, desktop, data-science, serverless and IoT code, API tooling,
//!   spreadsheets and mail (tune; first measured as a held-out author, after the rules were tuned on L: 0.836
//!   redaction and 10.8% false redaction);
//! - `Q`: `data/guard/secrets/Q.jsonl`, web frameworks and CMSs, payments and SaaS integrations, web servers,
//!   networking and mail ops, tickets (tune; first measured as a held-out author, after the rules were tuned on P:
//!   0.783 redaction and 9.6% false redaction);
//! - `T`: `data/guard/secrets/T.jsonl`, enterprise IT: Salesforce, SAP, Oracle, SQL Server, mainframe, Windows and
//!   identity administration, virtualisation, BI, Java EE and .NET configs (tune; first measured as a held-out
//!   author, after the rules were tuned on Q: 0.732 redaction and 10.9% false redaction);
//! - `U`: `data/guard/secrets/U.jsonl`, machine learning and data pipelines, game development, embedded and IoT,
//!   blockchain, HPC, observability and SRE (tune; first measured as a held-out author, after the rules were tuned
//!   on T: 0.757 redaction and 4.2% false redaction);
//! - `V`: `data/guard/secrets/V.jsonl`, telecom and VoIP, healthcare integration, security tooling, low-code and
//!   office automation, robotics and industrial, finance and trading (tune; first measured as a held-out author,
//!   after the rules were tuned on U: 0.781 redaction and 7.4% false redaction);
//! - `W`: `data/guard/secrets/W.jsonl`, media and broadcasting, education technology, GIS and mapping, fleet
//!   telematics and logistics, travel distribution, marketing automation and support platforms, legal and
//!   government e-filing, agriculture and weather, bioinformatics, mobile release engineering, browser extensions
//!   (tune; first measured as a held-out author, after the rules were tuned on V: 0.824 redaction and 5.8% false
//!   redaction);
//! - `Y`: `data/guard/secrets/Y.jsonl`, public-sector IT, insurance, energy and utilities, hospitality and retail,
//!   real estate and construction, sports tech, nonprofits, audio production, digital signage, ground stations and
//!   publishing, written mostly as chat, e-mail, tickets, OCR text, exports, traces, dumps and runbooks (tune;
//!   first measured as a held-out author, after the rules were tuned on W: 0.843 redaction and 8.9% false
//!   redaction);
//! - `Z`: `data/guard/secrets/Z.jsonl`, HR and payroll, ERP and accounting, ad tech, home automation and
//!   self-hosting, game servers and bots, network appliances, laboratory and clinical-trial systems, backup and
//!   storage appliances (tune; first measured as a held-out author, after the rules were tuned on Y: 0.852
//!   redaction and 3.7% false redaction).
//! - `AA`: `data/guard/secrets/AA.jsonl`, automotive and EV charging, aviation, maritime, e-commerce, VFX render
//!   farms, universities, libraries and museums, betting, print, observatories, restaurant tech and open-source
//!   release tooling, prose in nine languages (held out: written by an author who saw no rule and no other author's
//!   rows, after the rules were tuned on Z; about 300 of its 400 rows fill 180 shared templates with each domain's
//!   names and fresh values, so its rows are less varied than their count suggests).
//!
//! A secret row counts as redacted when every listed secret is gone from the output; a clean row counts as
//! falsely redacted when its text changes at all. Rows that are not valid (unknown label, a secret that is
//! not a substring of its text, a secret row without secrets) are skipped and counted. Every author and format is
//! printed; only the held-out authors are asserted, each against its floors in [`HELD_OUT`]. E's are issue 18's
//! targets (redaction >= 0.95, false redaction <= 0.02; the rules reach 0.969 at 0.011). AA's are regression
//! floors just below its first measurement (0.857 at 0.074), far from those targets. E was written before most
//! of the rules, so how far its figure carries to code nobody tuned for is measured on each new author before any
//! of its rows is read: L, P, Q, T, U, V, W, Y and Z measured 0.913 at 0.060, 0.836 at 0.108, 0.783 at 0.096,
//! 0.732 at 0.109, 0.757 at 0.042, 0.781 at 0.074, 0.824 at 0.058, 0.843 at 0.089 and 0.852 at 0.037 that way,
//! each before the rules were fitted to it, and AA 0.857 at 0.074. Raise a floor as redaction improves on authors
//! it was not tuned on; never lower one to pass. A held-out author's misses are never printed, only its rates, so rules cannot be
//! tuned on them. Misses of the authors in `FB_SECRETS_SHOW_MISSES`
//! (comma-separated, default none) are printed:
//!     FB_SECRETS_SHOW_MISSES=project,D cargo test -p feedback_core --test secrets_corpus -- --nocapture

#[path = "common/rate.rs"]
mod rate;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use feedback_core::guard::redact;
use rate::Rate;
use serde_json::Value;

/// The authors whose rows no rule was tuned on, each with its floors: (author, least redaction, most false
/// redaction).
const HELD_OUT: [(&str, f64, f64); 2] = [("E", 0.95, 0.02), ("AA", 0.85, 0.08)];
const AUTHORS: [(&str, &str); 16] = [
    ("project", "secrets.jsonl"),
    ("D", "secrets/D.jsonl"),
    ("E", "secrets/E.jsonl"),
    ("F", "secrets/F.jsonl"),
    ("J", "secrets/J.jsonl"),
    ("K", "secrets/K.jsonl"),
    ("L", "secrets/L.jsonl"),
    ("P", "secrets/P.jsonl"),
    ("Q", "secrets/Q.jsonl"),
    ("T", "secrets/T.jsonl"),
    ("U", "secrets/U.jsonl"),
    ("V", "secrets/V.jsonl"),
    ("W", "secrets/W.jsonl"),
    ("Y", "secrets/Y.jsonl"),
    ("Z", "secrets/Z.jsonl"),
    ("AA", "secrets/AA.jsonl"),
];

struct Row {
    line: usize,
    secret: bool,
    format: String,
    text: String,
    secrets: Vec<String>,
}

/// The rows of one author's file, and how many lines were not valid rows (those are skipped and reported).
fn load(name: &str) -> Result<(Vec<Row>, usize), String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/guard").join(name);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut rows = Vec::new();
    let mut invalid = 0;
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        match parse(line) {
            Some(mut row) => {
                row.line = i + 1;
                rows.push(row);
            }
            None => invalid += 1,
        }
    }
    Ok((rows, invalid))
}

/// A valid row: a known label, a text, and for secret rows at least one secret, each a substring of the text.
fn parse(line: &str) -> Option<Row> {
    let v: Value = serde_json::from_str(line).ok()?;
    let text = v.get("text")?.as_str()?.to_string();
    let format = v.get("format")?.as_str()?.to_string();
    let secrets: Vec<String> = match v.get("secrets") {
        None | Some(Value::Null) => Vec::new(),
        Some(s) => s.as_array()?.iter().map(|x| x.as_str().map(str::to_string)).collect::<Option<_>>()?,
    };
    let secret = match v.get("label")?.as_str()? {
        "secret" => true,
        "clean" => false,
        _ => return None,
    };
    let valid = !text.is_empty()
        && secrets.iter().all(|s| !s.is_empty() && text.contains(s.as_str()))
        && secret != secrets.is_empty();
    valid.then_some(Row { line: 0, secret, format, text, secrets })
}

#[derive(Default)]
struct Tally {
    redacted: Rate,
    false_redaction: Rate,
    /// Per format: (secret rows redacted, clean rows changed).
    by_format: BTreeMap<String, (Rate, Rate)>,
    not_idempotent: usize,
    misses: String,
}

fn measure(author: &str, rows: &[Row], show: bool, elapsed: &mut Duration, bytes: &mut usize) -> Tally {
    let mut t = Tally::default();
    for row in rows {
        let start = Instant::now();
        let out = redact(&row.text);
        *elapsed += start.elapsed();
        *bytes += row.text.len();
        if redact(&out.text).text != out.text {
            t.not_idempotent += 1;
            if show {
                let _ = writeln!(t.misses, "  NOT IDEMPOTENT {author}:{} {:?}", row.line, row.text);
            }
        }
        let entry = t.by_format.entry(row.format.clone()).or_default();
        if row.secret {
            let survived: Vec<&str> = row.secrets.iter().map(String::as_str).filter(|s| out.text.contains(s)).collect();
            t.redacted.add(survived.is_empty());
            entry.0.add(survived.is_empty());
            if show && !survived.is_empty() {
                let _ = writeln!(
                    t.misses,
                    "  MISS  {author}:{} [{}] {:?}\n        -> {:?}\n        survived {survived:?}",
                    row.line, row.format, row.text, out.text
                );
            }
        } else {
            let changed = out.text != row.text;
            t.false_redaction.add(changed);
            entry.1.add(changed);
            if show && changed {
                let _ = writeln!(
                    t.misses,
                    "  FALSE {author}:{} [{}] {:?}\n        -> {:?} {:?}",
                    row.line, row.format, row.text, out.text, out.kinds
                );
            }
        }
    }
    t
}

#[test]
fn secrets_by_author() {
    let show_list = std::env::var("FB_SECRETS_SHOW_MISSES").unwrap_or_default();
    let _ = redact("warm-up: compiles the rules once");
    let mut report = String::new();
    let mut failures = Vec::new();
    let mut elapsed = Duration::ZERO;
    let mut bytes = 0usize;
    let mut tune = (Rate::default(), Rate::default());

    for (author, file) in AUTHORS {
        let (rows, invalid) = match load(file) {
            Ok(loaded) => loaded,
            Err(e) => {
                // Reported with the other failures, after every author that is there has been measured.
                failures.push(format!("author {author}: {e}"));
                continue;
            }
        };
        let held_out = HELD_OUT.iter().find(|(a, ..)| *a == author);
        // A held-out author's misses are never shown, whatever the variable says.
        let show = held_out.is_none() && show_list.split(',').map(str::trim).any(|s| s == author);
        let t = measure(author, &rows, show, &mut elapsed, &mut bytes);
        let role = if held_out.is_some() { "held out" } else { "tuned on, shown as if held out" };
        let _ = writeln!(report, "== author {author} ({role}; {} rows, {invalid} invalid skipped) ==", rows.len());
        let _ = writeln!(report, "  redaction              {}", t.redacted.show());
        let _ = writeln!(report, "  false redaction        {}", t.false_redaction.show());
        let _ = writeln!(report, "  not idempotent         {}", t.not_idempotent);
        let _ = writeln!(report, "  {:<36} {:<22} clean rows changed", "format", "secret rows redacted");
        for (format, (red, clean)) in &t.by_format {
            let _ = writeln!(report, "    {format:<34} {:<22} {}", red.show(), clean.show());
        }
        let _ = write!(report, "{}", t.misses);
        if t.not_idempotent > 0 {
            failures.push(format!("author {author}: {} rows not idempotent", t.not_idempotent));
        }
        if let Some(&(_, min_redaction, max_false_redaction)) = held_out {
            assert!(!rows.is_empty(), "the held-out author {author} has no rows");
            if t.redacted.value() < min_redaction {
                failures.push(format!("held-out {author} redaction {:.3} < {min_redaction}", t.redacted.value()));
            }
            if t.false_redaction.value() > max_false_redaction {
                failures.push(format!(
                    "held-out {author} false redaction {:.3} > {max_false_redaction}",
                    t.false_redaction.value()
                ));
            }
        } else {
            tune.0.hits += t.redacted.hits;
            tune.0.total += t.redacted.total;
            tune.1.hits += t.false_redaction.hits;
            tune.1.total += t.false_redaction.total;
        }
    }
    let _ = writeln!(report, "== tuned-on authors together ==");
    let _ = writeln!(report, "  redaction              {}", tune.0.show());
    let _ = writeln!(report, "  false redaction        {}", tune.1.show());
    let per_kb = elapsed.as_secs_f64() * 1e6 / (bytes.max(1) as f64 / 1024.0);
    let _ = writeln!(report, "  redaction cost: {per_kb:.0} µs per kB (this build profile)");
    eprintln!("{report}");
    assert!(failures.is_empty(), "{} (report above)", failures.join("; "));
}

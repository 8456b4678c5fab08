//! The guard measured on labelled corpora: `data/guard/injection.jsonl`, `data/guard/secrets.jsonl` and the
//! project's benign sample notes (`data/sample_notes.csv`, lesson and correction of every row).
//!
//! Run with the report visible:
//!     cargo test -p feedback_core --test guard_corpus -- --nocapture
//!
//! Every split is measured and printed; only the `test` split is asserted (detection >= 0.95, false positives
//! <= 0.02, redaction >= 0.98, false redaction <= 0.02). Rules are tuned on `dev` misses only: the misses of
//! the splits listed in `FB_GUARD_SHOW_MISSES` (comma-separated, default `dev,test`; `sample` adds the
//! sample notes' false positives, which `dev` also shows) are printed, so tuning runs use
//! `FB_GUARD_SHOW_MISSES=dev`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use feedback_core::guard::{redact, screen};
use serde_json::Value;

const SPLITS: [&str; 2] = ["dev", "test"];
const MIN_DETECTION: f64 = 0.95;
const MAX_FALSE_POSITIVES: f64 = 0.02;
const MIN_REDACTION: f64 = 0.98;
const MAX_FALSE_REDACTION: f64 = 0.02;

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data")
}

fn load_jsonl(name: &str) -> Vec<Value> {
    let path = data_dir().join("guard").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).unwrap_or_else(|e| panic!("{} line {}: {e}", path.display(), i + 1)))
        .collect()
}

fn field<'a>(row: &'a Value, name: &str) -> &'a str {
    row.get(name).and_then(Value::as_str).unwrap_or("")
}

fn show_misses(split: &str) -> bool {
    let list = std::env::var("FB_GUARD_SHOW_MISSES").unwrap_or_else(|_| "dev,test".to_string());
    list.split(',').map(str::trim).any(|s| s == split || (split == "sample" && s == "dev"))
}

/// hits / total, with `-` for an empty group.
#[derive(Default, Clone, Copy)]
struct Rate {
    hits: usize,
    total: usize,
}

impl Rate {
    fn add(&mut self, hit: bool) {
        self.total += 1;
        self.hits += usize::from(hit);
    }
    fn value(self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.hits as f64 / self.total as f64
        }
    }
    fn show(self) -> String {
        if self.total == 0 {
            "-".to_string()
        } else {
            format!("{:.3} ({}/{})", self.value(), self.hits, self.total)
        }
    }
}

/// Benign lesson and correction texts of the sample notes.
fn sample_notes() -> Vec<(usize, String, String)> {
    let path = data_dir().join("sample_notes.csv");
    let mut reader = csv::Reader::from_path(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let headers = reader.headers().expect("csv header").clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"));
    let (lesson, correction) = (col("lesson"), col("correction"));
    reader
        .records()
        .enumerate()
        .map(|(i, r)| {
            let r = r.expect("csv row");
            (i + 2, r[lesson].to_string(), r[correction].to_string())
        })
        .collect()
}

fn rules_of(text: &str) -> String {
    screen(text).iter().map(|f| format!("{}:{} {:?}", f.family, f.rule, f.span)).collect::<Vec<_>>().join("; ")
}

#[test]
fn injection_corpus() {
    let rows = load_jsonl("injection.jsonl");
    let notes = sample_notes();
    let mut report = String::new();
    let mut failures = Vec::new();
    let mut elapsed = Duration::ZERO;
    let mut bytes = 0usize;

    let _ = screen("warm-up: compiles the rules once"); // keeps rule compilation out of the timing
                                                        // The sample notes are benign whatever the split: counted in every split's false-positive rate.
    let mut sample_fp = Rate::default();
    let mut sample_misses = String::new();
    for (line, lesson, correction) in &notes {
        let t = Instant::now();
        let flagged = !screen(lesson).is_empty() || !screen(correction).is_empty();
        elapsed += t.elapsed();
        bytes += lesson.len() + correction.len();
        sample_fp.add(flagged);
        if flagged {
            for text in [lesson, correction] {
                if !screen(text).is_empty() {
                    let _ =
                        writeln!(sample_misses, "  FP sample_notes.csv:{line}: {text:?}\n     -> {}", rules_of(text));
                }
            }
        }
    }

    for split in SPLITS {
        let mut detection = Rate::default();
        let mut by_family: BTreeMap<String, Rate> = BTreeMap::new();
        let mut benign = Rate::default();
        let mut misses = String::new();
        for row in rows.iter().filter(|r| field(r, "split") == split) {
            let text = field(row, "text");
            let t = Instant::now();
            let flagged = !screen(text).is_empty();
            elapsed += t.elapsed();
            bytes += text.len();
            let family = field(row, "family");
            let lang = field(row, "lang");
            match field(row, "label") {
                "attack" => {
                    detection.add(flagged);
                    by_family.entry(family.to_string()).or_default().add(flagged);
                    if !flagged {
                        let _ = writeln!(misses, "  MISS [{family}/{lang}] {text:?}");
                    }
                }
                "benign" => {
                    benign.add(flagged);
                    if flagged {
                        let _ = writeln!(misses, "  FP   [{family}/{lang}] {text:?}\n       -> {}", rules_of(text));
                    }
                }
                other => panic!("unknown label {other:?}"),
            }
        }
        let mut fp = benign;
        fp.hits += sample_fp.hits;
        fp.total += sample_fp.total;

        let _ = writeln!(report, "== injection, split {split} ==");
        let _ = writeln!(report, "  attack detection       {}", detection.show());
        for (family, rate) in &by_family {
            let _ = writeln!(report, "    {family:<22} {}", rate.show());
        }
        let _ = writeln!(report, "  false positives        {}", fp.show());
        let _ = writeln!(report, "    corpus benign        {}", benign.show());
        let _ = writeln!(report, "    sample notes         {}", sample_fp.show());
        if show_misses(split) && !misses.is_empty() {
            let _ = write!(report, "{misses}");
        }
        if split == "test" {
            if detection.value() < MIN_DETECTION {
                failures.push(format!("test detection {:.3} < {MIN_DETECTION}", detection.value()));
            }
            if fp.value() > MAX_FALSE_POSITIVES {
                failures.push(format!("test false positives {:.3} > {MAX_FALSE_POSITIVES}", fp.value()));
            }
        }
    }
    if show_misses("sample") && !sample_misses.is_empty() {
        let _ = write!(report, "== sample notes flagged ==\n{sample_misses}");
    }
    let per_kb = elapsed.as_secs_f64() * 1e6 / (bytes.max(1) as f64 / 1024.0);
    let _ = writeln!(report, "  screening cost: {per_kb:.0} µs per kB (this build profile)");

    eprintln!("{report}");
    assert!(failures.is_empty(), "{}\n{report}", failures.join("; "));
}

#[test]
fn secrets_corpus() {
    let rows = load_jsonl("secrets.jsonl");
    let mut report = String::new();
    let mut failures = Vec::new();
    for split in SPLITS {
        let mut redaction = Rate::default();
        let mut by_format: BTreeMap<String, Rate> = BTreeMap::new();
        let mut clean = Rate::default();
        let mut misses = String::new();
        for row in rows.iter().filter(|r| field(r, "split") == split) {
            let text = field(row, "text");
            let format = field(row, "format");
            let out = redact(text);
            assert_eq!(redact(&out.text).text, out.text, "redaction is not idempotent for {text:?}");
            match field(row, "label") {
                "secret" => {
                    let secrets: Vec<&str> = row
                        .get("secrets")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    let survived: Vec<&str> = secrets.iter().copied().filter(|s| out.text.contains(s)).collect();
                    redaction.add(survived.is_empty());
                    by_format.entry(format.to_string()).or_default().add(survived.is_empty());
                    if !survived.is_empty() {
                        let _ = writeln!(
                            misses,
                            "  MISS [{format}] {text:?}\n       -> {:?}\n       survived {survived:?}",
                            out.text
                        );
                    }
                }
                "clean" => {
                    let changed = out.text != text;
                    clean.add(changed);
                    if changed {
                        let _ = writeln!(misses, "  FALSE [{format}] {text:?}\n       -> {:?}", out.text);
                    }
                }
                other => panic!("unknown label {other:?}"),
            }
        }
        let _ = writeln!(report, "== secrets, split {split} ==");
        let _ = writeln!(report, "  redaction              {}", redaction.show());
        for (format, rate) in &by_format {
            let _ = writeln!(report, "    {format:<22} {}", rate.show());
        }
        let _ = writeln!(report, "  false redaction        {}", clean.show());
        if show_misses(split) && !misses.is_empty() {
            let _ = write!(report, "{misses}");
        }
        if split == "test" {
            if redaction.value() < MIN_REDACTION {
                failures.push(format!("test redaction {:.3} < {MIN_REDACTION}", redaction.value()));
            }
            if clean.value() > MAX_FALSE_REDACTION {
                failures.push(format!("test false redaction {:.3} > {MAX_FALSE_REDACTION}", clean.value()));
            }
        }
    }
    eprintln!("{report}");
    assert!(failures.is_empty(), "{}\n{report}", failures.join("; "));
}

/// Ad-hoc probe: `FB_GUARD_PROBE=lines.txt cargo test -p feedback_core --test guard_corpus probe -- --ignored
/// --nocapture` prints the findings and the redaction of every line (`\n` in a line stands for a newline).
#[test]
#[ignore]
fn probe() {
    let Ok(path) = std::env::var("FB_GUARD_PROBE") else { return };
    let text = std::fs::read_to_string(&path).expect("probe file");
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let line = line.replace("\\n", "\n");
        let red = redact(&line);
        let changed = if red.text == line { "kept".to_string() } else { format!("{:?} {:?}", red.kinds, red.text) };
        eprintln!("{line:?}\n   screen: {}\n   redact: {changed}", rules_of(&line));
    }
}

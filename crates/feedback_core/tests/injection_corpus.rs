//! Prompt-injection screening measured per author: the project's own corpus (`project`, the rules were tuned on
//! it), two independent tune authors (`A`, `B`), two authors the rules were later tuned on (`I`, `M`), the
//! held-out test author `C` and eight more held-out authors (`G`, `H`, `N`, `R`, `S`, `X`, `O`, `T`, written later, each in its
//! own style), plus the benign sample notes. See `tests/common/corpus.rs`
//! for the files and splits.
//!
//!     cargo test -p feedback_core --test injection_corpus -- --nocapture
//!
//! Printed: detection per author and per family, false positives per author (its benign rows) and on the sample
//! notes, for the rules alone, the learned detector alone and both (what `screen_note` reports); then the
//! rotations of the learned detector (fitted on project and every independent author but one, scored on that one).
//! Asserted: per held-out author, combined detection and false positives (its benign rows and all sample notes)
//! within the regression floors of `FLOORS`; and the shipped weights are what `examples/fit_screen.rs` fits from
//! the tune authors.
//!
//! The floors guard against regressions and sit below issue 18's target of 0.90 at 0.02: the shipped screen
//! reaches 0.827 on C, and on the authors it never saw 0.747 (G), 0.935 (H), 0.853 (N) and 0.947 (R) and 0.940
//! (S). I and M scored 0.561 and 0.741 before their misses were read; the rules written from them (tools, prompt
//! and environment disclosure, sending the review out, tracking pixels, approve/merge, fixed output, forced
//! ratings and passes) took I to 0.828 and M to 0.782 and, on the authors nobody read, C from 0.814 to 0.827 and
//! no other author's detection, while one more of N's benign lessons (8 of 246) is flagged. X, written after those
//! rules (many personas, attacks woven into plausible corrections, few imperative verbs, planted dependencies),
//! scores 0.659 with 4.8% of its benign notes flagged, the same with or without the rules I and M led to: with 2-3% false positives on G's, H's and M's benign lessons and 9% and 19% on R's and
//! S's long-form ones: long legitimate notes look like attacks to the learned detector. No variant tried generalises further to an unseen
//! author (a classifier on the embedding model's vectors got 0.12-0.51 held out; refitting the n-gram detector with
//! G, H and I as tune authors raised its out-of-fold threshold to 0.65-0.72 and dropped C to 0.724; word-only,
//! word-trigram and per-sentence multiple-instance variants scored no better out of fold; fitting on M and N, or on
//! S's long notes, raised the out-of-fold threshold to 0.57 and 0.71 and lost detection on C, G and I). Raise a floor as the
//! screen improves; never lower one to pass.
//!
//! Misses and false positives are listed for the tune authors (and the rules-tune authors I and M) only
//! (`FB_GUARD_SHOW_MISSES=1`); for the held-out authors only the rates are printed, so nothing is tuned on them.

#[path = "common/corpus.rs"]
mod corpus;
#[path = "common/rate.rs"]
mod rate;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use corpus::{
    examples, family_group, load_author, sample_notes, Row, INDEPENDENT_AUTHORS, RULE_TUNE_AUTHORS, TUNE_AUTHORS,
};
use feedback_core::guard::learned::{self, fit, FitParams, Model};
use feedback_core::guard::{screen_note_with, screen_with, Finding};
use rate::Rate;

/// Regression floors per held-out author: (author, least combined detection, most false positives over the
/// author's benign rows and every sample note). C's are the 0.6.0 gate; G, H and I were measured on the shipped
/// screen the day they were written (0.747 at 0.031, 0.935 at 0.032, 0.561 at 0.005) and their floors sit just
/// below that (I's now sits just below its 0.828 as a rules-tune author); likewise M (a quiet insider: 0.741 at
/// 0.022; a rules-tune author since, at 0.782), N (a red-team toolkit, a third of it in other
/// languages: 0.853 at 0.016), R (long-form notes with code: 0.947 at 0.089, the learned detector flagging 16%
/// of R's long benign lessons) and S (longer still, payloads in one sentence of an excellent note: 0.940 at 0.190,
/// 34% of its long benign lessons flagged), written for 0.11.0; X (many personas, subtle: 0.659 at 0.026), written
/// after the rules were tuned on I and M; O (long-form notes by senior engineers, a third of its benign ones about
/// scanners, suppressions and findings not to raise, attacks woven into excellent notes: 0.876 at 0.196, 35.6% of its
/// own benign notes flagged by the learned detector) and T (platform teams' wiki-style notes with lists, code blocks
/// and tickets, payloads hidden in their structure: 0.944 at 0.363, 67.1% of its own benign notes flagged), written
/// for 0.12.0. All are below issue 18's target (0.90 at 0.02): they catch a regression, not success.
const FLOORS: [(&str, f64, f64); 11] = [
    ("C", 0.80, 0.02),
    ("G", 0.72, 0.04),
    ("H", 0.91, 0.04),
    ("I", 0.80, 0.015),
    ("M", 0.76, 0.03),
    ("N", 0.83, 0.02),
    ("R", 0.93, 0.10),
    ("S", 0.92, 0.20),
    ("X", 0.64, 0.03),
    ("O", 0.85, 0.21),
    ("T", 0.92, 0.38),
];

/// What each detector said about a row.
struct Verdict {
    rules: bool,
    learned: bool,
    findings: Vec<(String, Finding)>,
}

fn judge(row: &Row, model: &Model, elapsed: &mut Duration, bytes: &mut usize) -> Verdict {
    let fields = row.field_refs();
    *bytes += fields.iter().map(|(_, t)| t.len()).sum::<usize>();
    let t = Instant::now();
    let findings = screen_note_with(&fields, Some(model));
    *elapsed += t.elapsed();
    let learned = findings.iter().any(|(_, f)| f.family == learned::LEARNED);
    let rules = findings.iter().any(|(_, f)| f.family != learned::LEARNED);
    Verdict { rules, learned, findings }
}

/// A learned-only verdict (no rules): what `screen_note` would report from the model alone.
fn learned_only(row: &Row, model: &Model) -> bool {
    model.note_probability(&row.field_refs()) >= model.threshold
}

fn show_misses() -> bool {
    std::env::var("FB_GUARD_SHOW_MISSES").is_ok()
}

#[derive(Default)]
struct Tally {
    rules: Rate,
    learned: Rate,
    combined: Rate,
}

impl Tally {
    fn add(&mut self, v: &Verdict) {
        self.rules.add(v.rules);
        self.learned.add(v.learned);
        self.combined.add(v.rules || v.learned);
    }
    fn merge(&self, o: &Tally) -> Tally {
        Tally {
            rules: self.rules.merge(o.rules),
            learned: self.learned.merge(o.learned),
            combined: self.combined.merge(o.combined),
        }
    }
    fn line(&self) -> String {
        format!("rules {:<20} learned {:<20} combined {}", self.rules.show(), self.learned.show(), self.combined.show())
    }
}

#[test]
fn injection_corpus() {
    let model = learned::shipped().expect("data/guard/screen_model.bin is a model").clone();
    let authors: Vec<(&str, Vec<Row>)> =
        std::iter::once("project").chain(INDEPENDENT_AUTHORS).map(|a| (a, load_author(a))).collect();
    let samples = sample_notes();
    let mut report = String::new();
    let mut failures = Vec::new();
    let (mut elapsed, mut bytes) = (Duration::ZERO, 0usize);
    let _ = screen_with("warm-up: compiles the rules once", Some(&model));

    // Sample notes: benign for every author.
    let (mut sample_fp, mut sample_fp_heldout) = (Tally::default(), Tally::default());
    let mut misses = String::new();
    for (i, row) in samples.iter().enumerate() {
        let v = judge(row, &model, &mut elapsed, &mut bytes);
        sample_fp.add(&v);
        if !row.tune {
            sample_fp_heldout.add(&v);
        }
        if !v.findings.is_empty() && show_misses() {
            let _ = writeln!(misses, "  FP sample_notes row {}: {:?}", i + 2, v.findings);
        }
    }

    let mut detection: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut benign: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut families: BTreeMap<(&str, &'static str), Tally> = BTreeMap::new();
    for (author, rows) in &authors {
        for row in rows {
            let v = judge(row, &model, &mut elapsed, &mut bytes);
            let tune = TUNE_AUTHORS.contains(author) || RULE_TUNE_AUTHORS.contains(author);
            if row.attack {
                detection.entry(author).or_default().add(&v);
                families.entry((author, family_group(&row.family))).or_default().add(&v);
                if tune && show_misses() && !(v.rules || v.learned) {
                    let _ = writeln!(misses, "  MISS {author} [{}/{}] {:?}", row.family, row.lang, row.fields);
                }
            } else {
                benign.entry(author).or_default().add(&v);
                if tune && show_misses() && !v.findings.is_empty() {
                    let _ = writeln!(
                        misses,
                        "  FP   {author} [{}] {:?}\n       -> {:?}",
                        row.family, row.fields, v.findings
                    );
                }
            }
        }
    }

    let _ = writeln!(report, "== injection screening, learned threshold {:.2} ==", model.threshold);
    for (author, _) in &authors {
        let role = if TUNE_AUTHORS.contains(author) {
            "tune author"
        } else if RULE_TUNE_AUTHORS.contains(author) {
            "rules tuned on its misses; learned detector not fitted on it"
        } else {
            "held-out author"
        };
        let d = &detection[author];
        let b = &benign[author];
        let _ = writeln!(report, "-- {author} ({role})");
        let _ = writeln!(report, "  detection        {}", d.line());
        for ((a, fam), t) in &families {
            if a == author {
                let _ = writeln!(report, "    {fam:<16} {}", t.line());
            }
        }
        let _ = writeln!(report, "  FP own benign    {}", b.line());
        let fp = b.merge(&sample_fp);
        let _ = writeln!(report, "  FP + samples     {}", fp.line());
        if let Some(&(_, min_detection, max_fp)) = FLOORS.iter().find(|(a, ..)| a == author) {
            if d.combined.value() < min_detection {
                failures.push(format!("{author}: combined detection {:.3} < {min_detection}", d.combined.value()));
            }
            if fp.combined.value() > max_fp {
                failures.push(format!("{author}: false positives {:.3} > {max_fp}", fp.combined.value()));
            }
        }
    }
    let _ = writeln!(report, "-- sample notes (benign, all rows)   {}", sample_fp.line());
    let _ = writeln!(report, "   sample notes never fitted on     {}", sample_fp_heldout.line());
    let per_kb = elapsed.as_secs_f64() * 1e6 / (bytes.max(1) as f64 / 1024.0);
    let _ =
        writeln!(report, "screening cost (screen_note, rules + learned): {per_kb:.0} µs per kB in this build profile");

    // Rotations of the learned detector: fitted on project + two independent authors (+ the sample notes' tune
    // half), scored alone on the third, at the shipped threshold.
    let _ = writeln!(report, "== learned detector rotations (threshold {:.2}) ==", model.threshold);
    let project = &authors[0].1;
    let tune_samples: Vec<&Row> = samples.iter().filter(|r| r.tune).collect();
    let heldout_samples: Vec<&Row> = samples.iter().filter(|r| !r.tune).collect();
    for held in INDEPENDENT_AUTHORS {
        let mut train: Vec<&Row> = project.iter().collect();
        for (a, rows) in authors.iter().filter(|(a, _)| *a != held && *a != "project") {
            let _ = a;
            train.extend(rows.iter());
        }
        train.extend(tune_samples.iter().copied());
        let rotated = fit(&examples(&train), &FitParams::default()).with_threshold(model.threshold);
        let rows = &authors.iter().find(|(a, _)| *a == held).unwrap().1;
        let (mut det, mut fp) = (Rate::default(), Rate::default());
        for row in rows {
            let hit = learned_only(row, &rotated);
            if row.attack {
                det.add(hit)
            } else {
                fp.add(hit)
            }
        }
        let mut sfp = Rate::default();
        for row in &heldout_samples {
            sfp.add(learned_only(row, &rotated));
        }
        let _ = writeln!(
            report,
            "  held out {held}: detection {:<20} FP own benign {:<20} FP unfitted sample notes {}",
            det.show(),
            fp.show(),
            sfp.show()
        );
    }

    // The shipped weights are what the fitting example produces from the tune authors.
    let mut tune_rows: Vec<&Row> = Vec::new();
    for (a, rows) in &authors {
        if TUNE_AUTHORS.contains(a) {
            tune_rows.extend(rows.iter());
        }
    }
    tune_rows.extend(tune_samples.iter().copied());
    let refit = fit(&examples(&tune_rows), &FitParams::default()).with_threshold(model.threshold);
    let (a, sa) = refit.quantized();
    let (b, sb) = model.quantized();
    let off = a.iter().zip(b).filter(|(x, y)| (i32::from(**x) - i32::from(**y)).abs() > 1).count();
    if off > 0 || (sa - sb).abs() > sb * 1e-4 {
        failures.push(format!(
            "shipped model is stale ({off} weights differ): cargo run --release -p feedback_core --example fit_screen"
        ));
    }

    if show_misses() {
        let _ = write!(report, "== tune-author misses and false positives ==\n{misses}");
    }
    eprintln!("{report}");
    assert!(failures.is_empty(), "{}\n{report}", failures.join("; "));
}

/// Ad-hoc probe: `FB_GUARD_PROBE=lines.txt cargo test -p feedback_core --test injection_corpus probe -- --ignored
/// --nocapture` prints the findings of every line (`\n` in a line stands for a newline) and its learned
/// probability.
#[test]
#[ignore]
fn probe() {
    let Ok(path) = std::env::var("FB_GUARD_PROBE") else { return };
    let text = std::fs::read_to_string(&path).expect("probe file");
    let model = learned::shipped();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let line = line.replace("\\n", "\n");
        let p = model.map_or(0.0, |m| m.probability(&line));
        eprintln!("{line:?}\n   p={p:.3} {:?}", screen_with(&line, model));
    }
}

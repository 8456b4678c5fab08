//! The near-duplicate comparison on labelled lesson pairs (`data/dedup/pairs/*.jsonl`): embeds both lessons of
//! each pair as the database does ("task_type: lesson", bge-small), compares them, and prints, per author, how
//! often each label and revision kind would merge, for cosine alone (`--cosine T`) and for the comparison.
//! With `--features` it writes one JSON line per pair (cosines, verdict, differences) for offline study; with
//! `--fit P,Q` it fits the merge model on those authors' pairs and writes it to `data/dedup/compare.json` (the
//! shipped model) before reporting; otherwise it reports with the shipped model. `--notes data/sample_notes.csv`
//! adds each sample note and its nearest neighbour as a distinct pair (S1: tune half of the task_types, S2: held
//! out): a store is full of lessons on one topic that are neither rewordings nor revisions.
//!
//! With `--separability` it prints, per author, how well each score the installed models give tells duplicates
//! from distinct pairs (AUC; 0.5 is a coin): the bound on what any threshold or fitted combination of them can
//! reach.
//!
//! FB_MODEL_DIR=... FB_ORT_LIBRARY=... cargo run --release -p feedback_core --example dedup_pairs -- [--fit P,Q] data/dedup/pairs/*.jsonl
use std::collections::BTreeMap;

use feedback_core::dedup::{align, compare, differences, features, fit, residuals, Calibrated, Verdict};
use feedback_core::model::{cosine, HostConfig, LocalHost, ModelHost, TextRole};
use feedback_core::note::document_text;

const SHIPPED: &str = "data/dedup/compare.json";
/// Pairs below this cosine are never compared (nor merged).
const NEIGHBOUR: f64 = 0.75;
/// Share of the tune authors' revisions and distinct pairs the fitted threshold lets merge.
const FALSE_MERGES: f64 = 0.01;

struct Pair {
    id: String,
    author: String,
    label: String,
    duplicate: bool,
    a: String,
    b: String,
    cosine: f64,
    residual: f64,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dump = args.iter().any(|a| a == "--features");
    let tune: Option<Vec<String>> =
        args.iter().position(|a| a == "--fit").map(|i| args[i + 1].split(',').map(str::to_string).collect());
    let cfg = HostConfig {
        runtime_library: std::env::var("FB_ORT_LIBRARY").expect("FB_ORT_LIBRARY").into(),
        model_dir: std::env::var("FB_MODEL_DIR").expect("FB_MODEL_DIR").into(),
        intra_threads: 2,
        dimensions: 384,
        batch_size: 64,
        max_batch_tokens: 4096,
        max_pair_tokens: 0,
    };
    let mut host = LocalHost::new();
    let mut embed = |texts: &[String]| {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        host.embed(&cfg, "bge-small-en-v1.5", &refs, TextRole::Document, &mut || ()).expect("embed")
    };
    let mut pairs = Vec::new();
    for f in args.iter().filter(|a| a.ends_with(".jsonl")) {
        let rows: Vec<serde_json::Value> = std::fs::read_to_string(f)
            .expect("pairs file")
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).expect("a JSON object per line"))
            .collect();
        let text = |r: &serde_json::Value, k: &str| r[k].as_str().unwrap_or_default().to_string();
        let docs: Vec<String> = rows
            .iter()
            .flat_map(|r| {
                [
                    document_text(&text(r, "task_type"), &text(r, "a")),
                    document_text(&text(r, "task_type"), &text(r, "b")),
                ]
            })
            .collect();
        let res: Vec<String> = rows
            .iter()
            .flat_map(|r| {
                let (x, y) = residuals(&text(r, "a"), &text(r, "b"));
                [x, y]
            })
            .collect();
        let (dv, rv) = (embed(&docs), embed(&res));
        for (i, r) in rows.iter().enumerate() {
            let id = text(r, "id");
            pairs.push(Pair {
                author: id.split('-').next().unwrap_or_default().to_string(),
                id,
                label: match r["revision_kind"].as_str() {
                    Some(k) => format!("revision:{k}"),
                    None => text(r, "label"),
                },
                duplicate: text(r, "label") == "duplicate",
                a: text(r, "a"),
                b: text(r, "b"),
                cosine: cosine(&dv[2 * i], &dv[2 * i + 1]) as f64,
                residual: cosine(&rv[2 * i], &rv[2 * i + 1]) as f64,
            });
        }
    }
    // The sample notes are lessons of one store by one more author, none a rewording or revision of another: each
    // note's nearest neighbour of its task_type (at the comparison's bound or nearer) is a distinct pair, as a
    // store is full of them. Half the task_types (alternating, sorted) tune, the other half are held out (S1/S2).
    if let Some(path) = args.iter().position(|a| a == "--notes").map(|i| args[i + 1].clone()) {
        let mut rdr = csv::Reader::from_path(&path).expect("sample notes");
        let notes: Vec<(String, String)> =
            rdr.records().map(|r| r.expect("a row")).map(|r| (r[0].to_string(), r[3].to_string())).collect();
        let mut types: Vec<&String> = notes.iter().map(|(t, _)| t).collect();
        types.sort();
        types.dedup();
        let docs: Vec<String> = notes.iter().map(|(t, l)| document_text(t, l)).collect();
        let v = embed(&docs);
        let mut found = Vec::new();
        for i in 0..notes.len() {
            let best = (0..notes.len())
                .filter(|&j| j != i && notes[j].0 == notes[i].0)
                .map(|j| (j, cosine(&v[i], &v[j]) as f64))
                .max_by(|x, y| x.1.total_cmp(&y.1));
            if let Some((j, c)) = best.filter(|(_, c)| *c >= NEIGHBOUR) {
                let half = if types.iter().position(|t| **t == notes[i].0).unwrap_or(0) % 2 == 0 { "S1" } else { "S2" };
                found.push((half, j, i, c));
            }
        }
        let res: Vec<String> = found
            .iter()
            .flat_map(|(_, j, i, _)| {
                let (x, y) = residuals(&notes[*j].1, &notes[*i].1);
                [x, y]
            })
            .collect();
        let rv = embed(&res);
        for (k, (half, j, i, c)) in found.iter().enumerate() {
            pairs.push(Pair {
                id: format!("{half}-{i}"),
                author: half.to_string(),
                label: "distinct".to_string(),
                duplicate: false,
                a: notes[*j].1.clone(),
                b: notes[*i].1.clone(),
                cosine: *c,
                residual: cosine(&rv[2 * k], &rv[2 * k + 1]) as f64,
            });
        }
    }
    if args.iter().any(|a| a == "--separability") {
        separability(&mut host, &cfg, &pairs);
        return;
    }
    let row = |p: &Pair| {
        let al = align(&p.a, &p.b);
        let d = differences(&p.a, &p.b, &al);
        features(p.cosine, p.residual, &al, &d)
    };
    let model: Calibrated = match &tune {
        Some(authors) => {
            let t: Vec<&Pair> = pairs.iter().filter(|p| authors.contains(&p.author)).collect();
            let rows: Vec<Vec<f64>> = t.iter().map(|p| row(p)).collect();
            let labels: Vec<bool> = t.iter().map(|p| p.duplicate).collect();
            let m = fit(&rows, &labels, NEIGHBOUR, FALSE_MERGES);
            std::fs::write(SHIPPED, serde_json::to_string_pretty(&m).unwrap() + "\n").expect("write the model");
            eprintln!("fitted on {} pairs of {}; wrote {SHIPPED}", rows.len(), authors.join(","));
            m
        }
        None => serde_json::from_str(&std::fs::read_to_string(SHIPPED).expect("the shipped model")).expect("model"),
    };
    // (author, label) -> [pairs, merged by cosine >= 0.92, merged by the comparison, called revision]
    let mut table: BTreeMap<(String, String), [usize; 4]> = BTreeMap::new();
    for p in &pairs {
        let c = compare(&p.a, &p.b, p.cosine, p.residual, &model);
        let e = table.entry((p.author.clone(), p.label.clone())).or_default();
        e[0] += 1;
        e[1] += (p.cosine >= 0.92) as usize;
        e[2] += (c.verdict == Verdict::Duplicate) as usize;
        e[3] += (c.verdict == Verdict::Revision) as usize;
        if dump {
            let o = serde_json::json!({"id": p.id, "label": p.label, "a": p.a, "b": p.b, "cosine": p.cosine,
                                       "residual": p.residual, "comparison": c});
            println!("{o}");
        }
    }
    if !dump {
        println!("{:<7} {:<30} {:>5} {:>9} {:>8} {:>9}", "author", "label", "pairs", "cos>=.92", "merged", "revision");
        for ((author, label), [n, c, m, r]) in &table {
            let s = |x: usize| x as f64 / *n as f64;
            println!("{author:<7} {label:<30} {n:>5} {:>9.2} {:>8.2} {:>9.2}", s(*c), s(*m), s(*r));
        }
    }
}

/// Per author, the AUC of duplicates against distinct pairs (the chance that a random duplicate scores above a
/// random distinct pair of the same author) for each score the installed models give a pair.
fn separability(host: &mut LocalHost, cfg: &HostConfig, pairs: &[Pair]) {
    let a: Vec<&str> = pairs.iter().map(|p| p.a.as_str()).collect();
    let b: Vec<&str> = pairs.iter().map(|p| p.b.as_str()).collect();
    let minilm = {
        let mut e = |t: &[&str]| host.embed(cfg, "all-MiniLM-L6-v2", t, TextRole::Document, &mut || ()).expect("embed");
        let (va, vb) = (e(&a), e(&b));
        va.iter().zip(&vb).map(|(x, y)| cosine(x, y) as f64).collect::<Vec<f64>>()
    };
    let cross = {
        let model = "ms-marco-MiniLM-L-12-v2";
        let ab: Vec<(&str, &str)> = a.iter().copied().zip(b.iter().copied()).collect();
        let ba: Vec<(&str, &str)> = b.iter().copied().zip(a.iter().copied()).collect();
        let s1 = host.rerank_pairs(cfg, model, &ab, &mut || ()).expect("rerank");
        let s2 = host.rerank_pairs(cfg, model, &ba, &mut || ()).expect("rerank");
        s1.iter().zip(&s2).map(|(x, y)| f64::from(x + y) / 2.0).collect::<Vec<f64>>()
    };
    let scores: [(&str, Vec<f64>); 4] = [
        ("bge-small cosine", pairs.iter().map(|p| p.cosine).collect()),
        ("bge-small cosine of the differing words", pairs.iter().map(|p| p.residual).collect()),
        ("all-MiniLM-L6-v2 cosine", minilm),
        ("ms-marco cross-encoder, both orders", cross),
    ];
    let mut authors: Vec<&str> = pairs.iter().map(|p| p.author.as_str()).collect();
    authors.sort_unstable();
    authors.dedup();
    println!("AUC of duplicates against distinct pairs (0.5: no better than a coin)");
    println!("{:<42} {}", "score", authors.iter().map(|a| format!("{a:>7}")).collect::<String>());
    for (name, s) in &scores {
        let cells: String = authors
            .iter()
            .map(|author| {
                let of = |dup: bool| -> Vec<f64> {
                    pairs
                        .iter()
                        .zip(s)
                        .filter(|(p, _)| p.author == *author && p.duplicate == dup && (dup || p.label == "distinct"))
                        .map(|(_, v)| *v)
                        .collect()
                };
                let (pos, neg) = (of(true), of(false));
                if pos.is_empty() || neg.is_empty() {
                    return format!("{:>7}", "-");
                }
                let wins: f64 = pos
                    .iter()
                    .flat_map(|x| {
                        neg.iter().map(move |y| {
                            if x > y {
                                1.0
                            } else if x == y {
                                0.5
                            } else {
                                0.0
                            }
                        })
                    })
                    .sum();
                format!("{:>7.3}", wins / (pos.len() * neg.len()) as f64)
            })
            .collect();
        println!("{name:<42} {cells}");
    }
}

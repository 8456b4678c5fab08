//! Peak memory and speed of one large call, for sizing `pg_feedback.max_batch_tokens`.
//!
//! One process per configuration (VmHWM is a process peak):
//!
//! ```text
//! cargo run --release -p feedback_core --example peak_rss -- WORKLOAD MAX_ROWS MAX_TOKENS ARENA
//!   WORKLOAD    short   1000 notes of ~25-40 tokens, embedded (bge-small-en-v1.5)
//!               t300    256 texts of ~300 tokens, embedded
//!               t512    256 texts of 600+ tokens (the model truncates them to 512), embedded
//!               calls   the short notes again, as 40 calls of 25 (what a shrink after each call costs)
//!               rerank  1000 passages of ~500 tokens scored against one query (ms-marco-MiniLM-L-12-v2)
//!               plan    no model run: padded tokens per workload, token-length vs byte-length order
//!   MAX_ROWS    most rows per run (pg_feedback.embed_batch_size), or "all"
//!   MAX_TOKENS  most padded tokens per run (pg_feedback.max_batch_tokens), or "none"
//!   ARENA       on | off: ONNX Runtime's CPU memory arena
//! ```
//!
//! Needs FB_MODEL_DIR and FB_ORT_LIBRARY (see scripts/common.sh); 1 intra-op thread. Prints one tab-separated
//! line: workload, rows, tokens, arena, runs, wall seconds, CPU seconds (all threads), inputs per CPU second,
//! VmHWM before the call (models loaded, corpus made), VmHWM after it and VmRSS after it, in MB.

use std::path::PathBuf;
use std::time::Instant;

use feedback_core::model::{plan_runs, HostConfig, LocalHost, ModelHost, RunLimits, TextRole};

const EMBEDDER: &str = "bge-small-en-v1.5";
const CROSS_ENCODER: &str = "ms-marco-MiniLM-L-12-v2";

/// Review lessons of the kind pg_feedback stores: the corpus is made of these, shuffled and varied.
const SENTENCES: &[&str] = &[
    "The query builder concatenates the customer id into the WHERE clause, which is a classic injection vector.",
    "Use a bound parameter instead of formatting user input into SQL, even when the value looks numeric.",
    "Table and column names cannot be parameters, so check them against an allow-list before quoting them.",
    "Calling requests.get without a timeout can hang a worker forever when the upstream service stalls.",
    "Set an explicit connect and read timeout on every outbound HTTP call and surface the error to the caller.",
    "An AWS secret key committed in a test fixture is still a leaked secret and must be rotated at once.",
    "Deleting the file in a later commit is not enough: purge it from the history and invalidate the credential.",
    "Optional.get() without isPresent() throws NoSuchElementException when the repository returns nothing.",
    "Prefer orElseThrow with a message that names the missing entity, so the log says what was not found.",
    "Loading every row to count them is an N+1 pattern; ask the database for a count instead.",
    "The loop issues one query per order line, so a large basket makes hundreds of round trips.",
    "Fetch the related rows in one query with a join or an IN list and build the map in memory.",
    "GPL-3.0 code cannot be linked into a proprietary binary without releasing the combined source.",
    "Check the license of every new dependency before it is merged, not when the release is being packaged.",
    "Null-check the map lookup before dereferencing it, because Map.get returns null for a missing key.",
    "A regex with nested quantifiers such as (a+)+ can backtrack catastrophically on crafted input.",
    "Bound the input length before matching, or use a regex engine that guarantees linear time.",
    "The retry loop has no backoff and no cap, so an outage turns every client into a load generator.",
    "Add exponential backoff with jitter and stop after a few attempts, then report the last error.",
    "The cache key ignores the tenant id, so one customer can be served another customer's report.",
    "Include every input that changes the result in the cache key, and add a test with two tenants.",
    "Floating point is the wrong type for money: rounding errors accumulate over many invoice lines.",
    "Store amounts as integer cents or as a decimal type with an explicit scale, and round once at the end.",
    "The handler logs the full request body, which includes passwords and session tokens.",
    "Redact secrets before logging, or log only the fields that an operator actually needs.",
    "The migration adds a NOT NULL column without a default, which fails on a table that already has rows.",
    "Add the column as nullable, backfill it in batches, then add the constraint in a later migration.",
    "Comparing the signature with == leaks timing information; use a constant-time comparison.",
    "The temporary file is created with a predictable name in a shared directory, which invites a race.",
    "Create temporary files with the standard library's secure helper, which opens them exclusively.",
    "The date is parsed in the server's local time zone, so reports shift by an hour twice a year.",
    "Keep timestamps in UTC end to end and convert to the user's zone only when displaying them.",
    "The error is swallowed by an empty catch block, so the job reports success after losing data.",
    "Either handle the exception with a clear recovery path or let it propagate to the caller.",
    "A shared mutable list is appended to from several threads without a lock.",
    "Use a concurrent collection or guard the list with a mutex and keep the critical section short.",
    "The endpoint returns a stack trace to the client when validation fails, exposing internal paths.",
    "Return a stable error code and message to clients and keep the details in the server log.",
    "Pagination uses OFFSET on a table that grows quickly, so deep pages get slower and skip rows.",
    "Use keyset pagination on an indexed column and pass the last seen key to fetch the next page.",
];

const NAMES: &[&str] =
    &["billing", "checkout", "reporting", "auth", "search", "inventory", "export", "notifications", "audit", "sync"];

/// A small deterministic generator (xorshift64*), so every process builds the same corpus.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// `count` texts, each grown sentence by sentence until it reaches a random target in `min..=max` tokens (a
/// sentence that would overshoot `max` is left out once the text has `min`).
fn corpus(host: &mut LocalHost, cfg: &HostConfig, rng: &mut Rng, count: usize, min: usize, max: usize) -> Vec<String> {
    (0..count)
        .map(|_| {
            let target = min + rng.below(max - min + 1);
            let mut text = format!("In the {} module:", NAMES[rng.below(NAMES.len())]);
            let mut count = host.count_tokens(cfg, EMBEDDER, &text).unwrap();
            while count < target {
                let longer = format!("{text} {}", SENTENCES[rng.below(SENTENCES.len())]);
                let longer_count = host.count_tokens(cfg, EMBEDDER, &longer).unwrap();
                if longer_count > max && count >= min {
                    break;
                }
                (text, count) = (longer, longer_count);
            }
            text
        })
        .collect()
}

/// CPU time of all the process's threads so far, in seconds: unlike wall time, not inflated when other processes
/// compete for the cores (the session has 1 intra-op thread: the caller's).
fn cpu_seconds() -> f64 {
    let mut ns = 0u64;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        if let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) {
            ns += stat.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    ns as f64 / 1e9
}

fn status_mb(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    let kb: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb / 1024.0
}

/// Padded tokens of a workload's runs when inputs are ordered by `key` and packed greedily under `limits`.
fn padded_tokens(lengths: &[usize], key: &[usize], limits: RunLimits) -> (usize, usize) {
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| key[i]);
    let (mut padded, mut runs, mut rows, mut longest) = (0, 0, 0, 0);
    for i in order {
        let l = lengths[i].max(longest);
        if rows > 0 && (rows + 1 > limits.max_rows || (rows + 1) * l > limits.max_tokens) {
            padded += rows * longest;
            runs += 1;
            (rows, longest) = (0, 0);
        }
        rows += 1;
        longest = longest.max(lengths[i]);
    }
    if rows > 0 {
        padded += rows * longest;
        runs += 1;
    }
    (padded, runs)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [workload, rows, tokens, arena] = &args[..] else {
        panic!("usage: peak_rss short|t300|t512|rerank|plan MAX_ROWS|all MAX_TOKENS|none on|off");
    };
    let var = |name: &str| PathBuf::from(std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set")));
    let cfg = HostConfig {
        runtime_library: var("FB_ORT_LIBRARY"),
        model_dir: var("FB_MODEL_DIR"),
        intra_threads: 1,
        dimensions: 384,
        batch_size: if rows == "all" { usize::MAX } else { rows.parse().unwrap() },
        max_batch_tokens: if tokens == "none" { usize::MAX } else { tokens.parse().unwrap() },
        max_pair_tokens: 0,
    };
    let mut host = LocalHost::new();
    host.set_cpu_arena(arena == "on");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (short, t300, t512) = match workload.as_str() {
        "short" | "calls" | "plan" => (1000, 0, 0),
        "t300" => (0, 256, 0),
        "t512" => (0, 0, 256),
        _ => (0, 0, 0),
    };
    let mut texts = corpus(&mut host, &cfg, &mut rng, short, 25, 40);
    texts.extend(corpus(&mut host, &cfg, &mut rng, t300, 280, 320));
    texts.extend(corpus(&mut host, &cfg, &mut rng, t512, 600, 700));
    let query = "is building SQL from user input with string formatting an injection risk?";
    let passages = if workload == "rerank" || workload == "plan" {
        corpus(&mut host, &cfg, &mut rng, 1000, 480, 520)
    } else {
        Vec::new()
    };

    if workload == "plan" {
        let t300 = corpus(&mut host, &cfg, &mut rng, 256, 280, 320);
        let limits = cfg.run_limits();
        for (name, set, extra) in [("short", &texts, 2), ("t300", &t300, 2), ("rerank", &passages, 3)] {
            let query_tokens = if extra == 3 { host.count_tokens(&cfg, EMBEDDER, query).unwrap() } else { 0 };
            let lengths: Vec<usize> = set
                .iter()
                .map(|t| (host.count_tokens(&cfg, EMBEDDER, t).unwrap() + query_tokens + extra).min(512))
                .collect();
            let bytes: Vec<usize> = set.iter().map(|t| t.len()).collect();
            let real: usize = lengths.iter().sum();
            let (by_tokens, runs) = padded_tokens(&lengths, &lengths, limits);
            let (by_bytes, runs_b) = padded_tokens(&lengths, &bytes, limits);
            assert_eq!(plan_runs(&lengths, limits).len(), runs);
            println!(
                "{name}\t{rows}\t{tokens}\treal tokens {real}\ttoken order: {by_tokens} padded, {runs} runs\t\
                 byte order: {by_bytes} padded, {runs_b} runs"
            );
        }
        return;
    }

    let inputs: Vec<&str> = if workload == "rerank" { &passages } else { &texts }.iter().map(|s| s.as_str()).collect();
    // Load the session under test and warm it up with a tiny call, so the measured call is only the work.
    if workload == "rerank" {
        host.rerank(&cfg, CROSS_ENCODER, query, &inputs[..2], &mut || {}).unwrap();
    } else {
        host.embed(&cfg, EMBEDDER, &inputs[..2], TextRole::Document, &mut || {}).unwrap();
    }
    let hwm_before = status_mb("VmHWM:");
    let runs_before = host.stats();
    let (start, cpu_start) = (Instant::now(), cpu_seconds());
    if workload == "rerank" {
        host.rerank(&cfg, CROSS_ENCODER, query, &inputs, &mut || {}).unwrap();
    } else if workload == "calls" {
        for call in inputs.chunks(25) {
            host.embed(&cfg, EMBEDDER, call, TextRole::Document, &mut || {}).unwrap();
        }
    } else {
        host.embed(&cfg, EMBEDDER, &inputs, TextRole::Document, &mut || {}).unwrap();
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_start;
    let after = host.stats();
    let runs = (after.embed_runs + after.rerank_runs) - (runs_before.embed_runs + runs_before.rerank_runs);
    println!(
        "{workload}\t{rows}\t{tokens}\t{arena}\t{runs}\t{seconds:.2}\t{cpu:.2}\t{:.1}\t{hwm_before:.0}\t{:.0}\t{:.0}",
        inputs.len() as f64 / cpu,
        status_mb("VmHWM:"),
        status_mb("VmRSS:"),
    );
}

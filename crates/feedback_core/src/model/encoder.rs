//! The two model kinds pg_feedback runs: a bi-encoder that embeds texts, and a cross-encoder that scores
//! (query, passage) pairs. Both are a verified ONNX session plus the model's own tokenizer.
//!
//! Memory: a run's activations grow with rows x longest row (and its attention scores with rows x longest²), so a
//! call is never one run. Inputs are tokenized once without padding, sorted by token length and packed into runs
//! of at most [`RunLimits::max_rows`] rows and [`RunLimits::max_tokens`] padded tokens; each run is padded to its
//! own longest row. The caller's `between` callback runs before every model run and between tokenization chunks,
//! so a cancelled statement stops within one run.

use std::borrow::Cow;
use std::path::Path;

use ort::environment::Environment;
use ort::ep;
use ort::session::{RunOptions, Session, SessionInputValue};
use ort::value::Tensor;
use tokenizers::{EncodeInput, Tokenizer, TruncationParams, TruncationStrategy};

use super::error::{ModelError, Result};
use super::manifest::{Manifest, ModelKind};
use super::pooling::{l2_normalize, pool};

/// Inputs tokenized between two calls of the caller's `between` callback: at most this many, and no more input
/// bytes after this many (one input of the largest size the extension accepts takes a few tens of milliseconds,
/// so a cancelled call stops within about that).
const TOKENIZE_CHUNK: usize = 64;
const TOKENIZE_CHUNK_BYTES: usize = 64 * 1024;

/// A call whose largest run pads to more tokens than this returns the CPU arena's free memory to the system after
/// its last run. The arena keeps its peak otherwise: after one call with runs of 8192 tokens, an idle backend would
/// hold ~400 MB more for the rest of its life. Runs of up to 1024 tokens (the recommended max_batch_tokens) leave
/// the arena at a few MB, so calls that small never pay for the regrowth; for larger calls the regrowth was not
/// measurable (`examples/peak_rss.rs calls`: 40 calls of 25 notes, within run-to-run noise).
const SHRINK_ABOVE_TOKENS: usize = 1024;

/// Whether a text is a search query or a stored document: some models (bge) prefix queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextRole {
    Query,
    Document,
}

/// How one call is split into model runs: at most `max_rows` inputs and at most `max_tokens` padded tokens (rows x
/// the run's longest row) per run. An input longer than `max_tokens` runs alone. Zeros count as 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    pub max_rows: usize,
    pub max_tokens: usize,
}

impl RunLimits {
    /// No limit at all: one run per call.
    pub const UNBOUNDED: RunLimits = RunLimits { max_rows: usize::MAX, max_tokens: usize::MAX };
}

/// How a session is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionOptions {
    /// ONNX Runtime intra-op threads (at least 1).
    pub intra_threads: usize,
    /// Whether ONNX Runtime's CPU memory arena is on. On, large calls shrink it when they end (see
    /// `SHRINK_ABOVE_TOKENS`); off, every tensor comes from malloc, which measured slower (many page faults) and
    /// with a higher peak (see `CPU_ARENA` in host.rs).
    pub cpu_arena: bool,
}

/// Groups inputs of the given token lengths into model runs under `limits`: shortest first (a stable sort, so
/// equal lengths keep input order), each run filled greedily while it stays within both limits. Returns input
/// indices per run, in run order; every index appears exactly once.
pub fn plan_runs(lengths: &[usize], limits: RunLimits) -> Vec<Vec<usize>> {
    let (max_rows, max_tokens) = (limits.max_rows.max(1), limits.max_tokens.max(1));
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| lengths[i]);
    let mut runs: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    for i in order {
        // Sorted ascending: the newcomer is the run's longest row.
        let rows = current.len() + 1;
        if !current.is_empty() && (rows > max_rows || rows.saturating_mul(lengths[i]) > max_tokens) {
            runs.push(std::mem::take(&mut current));
        }
        current.push(i);
    }
    if !current.is_empty() {
        runs.push(current);
    }
    runs
}

/// One tokenized input, unpadded (its attention mask is all ones).
struct Tokens {
    ids: Vec<u32>,
    type_ids: Vec<u32>,
}

/// Inputs longer than `max_length` tokens (special tokens included) lose tokens from their longer side first.
fn truncation(max_length: usize) -> TruncationParams {
    TruncationParams { max_length, strategy: TruncationStrategy::LongestFirst, ..Default::default() }
}

/// A model folder loaded into memory: manifest, tokenizer (truncating to the model's limit, never padding) and
/// ONNX session.
struct Loaded {
    manifest: Manifest,
    tokenizer: Tokenizer,
    /// Padding written into a run's shorter rows (their attention mask is 0 there): the tokenizer.json's own pad
    /// ids when it has padding parameters, else 0.
    pad_id: u32,
    pad_type_id: u32,
    session: Session,
    input_names: Vec<String>,
    /// Model runs so far (including the load-time probe).
    runs: u64,
    cpu_arena: bool,
    /// Run options of a call's last run when the call was large: shrink the CPU arena afterwards.
    shrink: RunOptions,
}

impl Loaded {
    fn open(env: &Environment, dir: &Path, kind: ModelKind, options: SessionOptions) -> Result<Self> {
        tokenizers::utils::parallelism::set_parallelism(false);
        let manifest = Manifest::read(dir)?;
        if manifest.kind != kind {
            return Err(ModelError::WrongKind {
                name: manifest.name.clone(),
                expected: kind.as_str().to_string(),
                actual: manifest.kind.as_str().to_string(),
            });
        }
        let mut tokenizer = Self::tokenizer(&manifest, &manifest.read_verified(dir, &manifest.tokenizer)?)?;
        // Runs are padded here, per run, to the run's longest row: padding in the tokenizer (some packaged
        // tokenizer.json files pad every input to 512) would waste work and memory.
        let (pad_id, pad_type_id) = tokenizer.get_padding().map_or((0, 0), |p| (p.pad_id, p.pad_type_id));
        tokenizer.with_padding(None);
        let graph = manifest.read_verified(dir, &manifest.onnx)?;
        let fail = |e: String| ModelError::Inference { name: manifest.name.clone(), reason: e };
        let session = Session::builder(env)
            .map_err(|e| fail(e.to_string()))?
            .with_intra_threads(options.intra_threads.max(1))
            .map_err(|e| fail(e.to_string()))?
            // No spinning between parallel sections: a multi-threaded run may overlap another runner's run (the
            // worker's idle threads), and spinning threads would take its core. Measured on 2 cores, code inputs:
            // a lone run is as fast (p50 118-121 ms against 117-118 with spinning), two clients lose 3% of their
            // throughput to the overlap instead of 7%.
            .with_intra_op_spinning(false)
            .map_err(|e| fail(e.to_string()))?
            .with_inter_threads(1)
            .map_err(|e| fail(e.to_string()))?
            // Memory-pattern planning keeps per-shape buffers alive: ~37 MB more per backend, no speed gain here.
            .with_memory_pattern(false)
            .map_err(|e| fail(e.to_string()))?
            .with_execution_providers([ep::CPU::default()
                .with_arena_allocator(options.cpu_arena)
                .build()
                .error_on_failure()])
            .map_err(|e| fail(e.to_string()))?
            .commit_from_memory(&graph)
            .map_err(|e| fail(e.to_string()))?;
        let input_names = session.inputs().iter().map(|o| o.name().to_string()).collect();
        let mut shrink = RunOptions::new().map_err(|e| fail(e.to_string()))?;
        shrink.set("memory.enable_memory_arena_shrinkage", "cpu:0").map_err(|e| fail(e.to_string()))?;
        Ok(Loaded {
            manifest,
            tokenizer,
            pad_id,
            pad_type_id,
            session,
            input_names,
            runs: 0,
            cpu_arena: options.cpu_arena,
            shrink,
        })
    }

    fn tokenizer(manifest: &Manifest, bytes: &[u8]) -> Result<Tokenizer> {
        let fail = |e: String| ModelError::Tokenizer { name: manifest.name.clone(), reason: e };
        let mut tokenizer = Tokenizer::from_bytes(bytes).map_err(|e| fail(e.to_string()))?;
        tokenizer.with_truncation(Some(truncation(manifest.max_tokens))).map_err(|e| fail(e.to_string()))?;
        Ok(tokenizer)
    }

    /// Tokenizes `count` inputs (made by `input(i)`) with special tokens, truncated to the model's limit and not
    /// padded, calling `between` between chunks of [`TOKENIZE_CHUNK`] inputs or [`TOKENIZE_CHUNK_BYTES`] bytes
    /// (`bytes(i)` is input i's length), whichever comes first.
    fn tokenize<'s, E: Into<EncodeInput<'s>>>(
        &self,
        count: usize,
        input: impl Fn(usize) -> E,
        bytes: impl Fn(usize) -> usize,
        between: &mut dyn FnMut(),
    ) -> Result<Vec<Tokens>> {
        let fail = |e: String| ModelError::Tokenizer { name: self.manifest.name.clone(), reason: e };
        let mut out = Vec::with_capacity(count);
        let (mut inputs, mut chunk_bytes) = (0usize, 0usize);
        for i in 0..count {
            if inputs == TOKENIZE_CHUNK || chunk_bytes >= TOKENIZE_CHUNK_BYTES {
                between();
                (inputs, chunk_bytes) = (0, 0);
            }
            inputs += 1;
            chunk_bytes += bytes(i);
            let encoding = self.tokenizer.encode_fast(input(i), true).map_err(|e| fail(e.to_string()))?;
            out.push(Tokens { ids: encoding.get_ids().to_vec(), type_ids: encoding.get_type_ids().to_vec() });
        }
        Ok(out)
    }

    /// A call's runs (see [`plan_runs`]), and whether its last run should shrink the CPU arena.
    fn plan(&self, tokens: &[Tokens], limits: RunLimits) -> (Vec<Vec<usize>>, bool) {
        let lengths: Vec<usize> = tokens.iter().map(|t| t.ids.len()).collect();
        let runs = plan_runs(&lengths, limits);
        // Sorted ascending: a run's last row is its longest.
        let largest = runs.iter().map(|r| r.len() * r.last().map_or(0, |&i| lengths[i])).max().unwrap_or(0);
        (runs, self.cpu_arena && largest > SHRINK_ABOVE_TOKENS)
    }

    /// Runs the graph on `tokens` in the runs [`Loaded::plan`] makes of them under `limits`, calling `between` before
    /// each run, and returns what `read` makes of each run's output (one item per row; `read` gets the run's row
    /// count, then the output as [`Loaded::run`] gives it) in input order. The last run shrinks the CPU arena if the
    /// call is large.
    fn run_all<T: Clone + Default>(
        &mut self,
        tokens: &[Tokens],
        limits: RunLimits,
        between: &mut dyn FnMut(),
        mut read: impl FnMut(usize, &[i64], &[f32], &[i64]) -> Result<Vec<T>, String>,
    ) -> Result<Vec<T>> {
        let (runs, shrink) = self.plan(tokens, limits);
        let last = runs.len().saturating_sub(1);
        let mut out = vec![T::default(); tokens.len()];
        for (n, run) in runs.iter().enumerate() {
            between();
            let rows: Vec<&Tokens> = run.iter().map(|&i| &tokens[i]).collect();
            let items =
                self.run(&rows, shrink && n == last, |shape, data, mask| read(rows.len(), shape, data, mask))?;
            for (&i, item) in run.iter().zip(items) {
                out[i] = item;
            }
        }
        Ok(out)
    }

    /// Runs the graph once on `rows`, padded to the longest, with the real attention mask, then shrinks the CPU
    /// arena if `shrink`; `read` gets the output's shape and values and the mask (`rows x seq`, row-major).
    fn run<T>(
        &mut self,
        rows: &[&Tokens],
        shrink: bool,
        read: impl FnOnce(&[i64], &[f32], &[i64]) -> Result<T, String>,
    ) -> Result<T> {
        let batch = rows.len();
        let seq = rows.iter().map(|r| r.ids.len()).max().unwrap_or(0);
        let mut ids = Vec::with_capacity(batch * seq);
        let mut mask = Vec::with_capacity(batch * seq);
        let mut types = Vec::with_capacity(batch * seq);
        for r in rows {
            let pad = seq - r.ids.len();
            ids.extend(r.ids.iter().map(|&x| i64::from(x)));
            ids.extend(std::iter::repeat_n(i64::from(self.pad_id), pad));
            mask.extend(std::iter::repeat_n(1i64, r.ids.len()));
            mask.extend(std::iter::repeat_n(0i64, pad));
            types.extend(r.type_ids.iter().map(|&x| i64::from(x)));
            types.extend(std::iter::repeat_n(i64::from(self.pad_type_id), pad));
        }
        let name = self.manifest.name.clone();
        let fail = |e: String| ModelError::Inference { name: name.clone(), reason: e };
        let mut inputs: Vec<(Cow<'static, str>, SessionInputValue<'static>)> = Vec::new();
        for input in &self.input_names {
            let data = match input.as_str() {
                "input_ids" => std::mem::take(&mut ids),
                "attention_mask" => mask.clone(),
                "token_type_ids" => std::mem::take(&mut types),
                other => return Err(fail(format!("unexpected graph input \"{other}\""))),
            };
            let tensor = Tensor::from_array(([batch, seq], data)).map_err(|e| fail(e.to_string()))?;
            inputs.push((Cow::Owned(input.clone()), tensor.into()));
        }
        self.runs += 1;
        let output_name = &self.manifest.output;
        let outputs =
            if shrink { self.session.run_with_options(inputs, &self.shrink) } else { self.session.run(inputs) }
                .map_err(|e| fail(e.to_string()))?;
        let value =
            outputs.get(output_name).ok_or_else(|| fail(format!("the graph has no output \"{output_name}\"")))?;
        let (shape, data) = value.try_extract_tensor::<f32>().map_err(|e| fail(e.to_string()))?;
        read(shape, data, &mask).map_err(fail)
    }
}

/// What [`Embedder`] and [`CrossEncoder`] both tell of their [`Loaded`] model (a field `model`).
macro_rules! loaded_accessors {
    () => {
        pub fn name(&self) -> &str {
            &self.model.manifest.name
        }

        /// The manifest the loaded files were verified against.
        pub fn manifest(&self) -> &Manifest {
            &self.model.manifest
        }

        /// Model runs this session has made so far.
        pub fn runs(&self) -> u64 {
            self.model.runs
        }
    };
}

/// A bi-encoder: text → one L2-normalised vector.
pub struct Embedder {
    model: Loaded,
}

impl Embedder {
    /// Loads and verifies the model in `dir`, and checks that it really produces `expected_dims`-wide vectors.
    pub fn load(env: &Environment, dir: &Path, options: SessionOptions, expected_dims: usize) -> Result<Self> {
        let model = Loaded::open(env, dir, ModelKind::Embedding, options)?;
        let mut embedder = Embedder { model };
        let name = embedder.name().to_string();
        if embedder.model.manifest.dimensions != expected_dims {
            return Err(ModelError::WrongDimensions {
                name,
                expected: expected_dims,
                actual: embedder.model.manifest.dimensions,
            });
        }
        // The manifest may be wrong about the graph: one tiny run tells the truth.
        let probe = embedder.embed(&["probe"], TextRole::Document, RunLimits::UNBOUNDED, &mut || {})?;
        if probe[0].len() != expected_dims {
            return Err(ModelError::WrongDimensions { name, expected: expected_dims, actual: probe[0].len() });
        }
        Ok(embedder)
    }

    loaded_accessors!();

    /// Embeds any number of texts in runs within `limits` (see [`plan_runs`]), calling `between` before each
    /// run and between tokenization chunks (the extension checks for query cancellation there). Queries get the
    /// model's query prefix; inputs longer than the model's limit are truncated; vectors are pooled as the
    /// manifest says, L2-normalised when it asks, and come back in input order.
    pub fn embed(
        &mut self,
        texts: &[&str],
        role: TextRole,
        limits: RunLimits,
        between: &mut dyn FnMut(),
    ) -> Result<Vec<Vec<f32>>> {
        let prefix = match role {
            TextRole::Query => self.model.manifest.query_prefix.as_str(),
            TextRole::Document => "",
        };
        let tokens = self.model.tokenize(
            texts.len(),
            |i| if prefix.is_empty() { Cow::Borrowed(texts[i]) } else { Cow::Owned(format!("{prefix}{}", texts[i])) },
            |i| prefix.len() + texts[i].len(),
            between,
        )?;
        let pooling = self.model.manifest.pooling.expect("validated: embedding models have pooling");
        let normalize = self.model.manifest.normalize;
        self.model.run_all(&tokens, limits, between, |rows, shape, states, mask| {
            let &[batch, seq, hidden] = shape else {
                return Err(format!("expected a [batch, seq, hidden] output, got shape {shape:?}"));
            };
            let (batch, seq, hidden) = (batch as usize, seq as usize, hidden as usize);
            if batch != rows || states.len() != batch * seq * hidden || mask.len() != batch * seq {
                return Err(format!("output shape {shape:?} does not match the {rows} inputs"));
            }
            Ok((0..batch)
                .map(|r| {
                    let mut v = pool(
                        &states[r * seq * hidden..(r + 1) * seq * hidden],
                        &mask[r * seq..(r + 1) * seq],
                        hidden,
                        pooling,
                    );
                    if normalize {
                        l2_normalize(&mut v);
                    }
                    v
                })
                .collect::<Vec<_>>())
        })
    }

    /// Number of tokens the model's tokenizer makes of `text`, special tokens excluded, without truncation.
    /// Truncation is switched off for the count and restored: one tokenizer per model, no copy.
    pub fn count_tokens(&mut self, text: &str) -> Result<usize> {
        let tokenizer = &mut self.model.tokenizer;
        let truncation = tokenizer.get_truncation().cloned();
        let fail = |e: String| ModelError::Tokenizer { name: self.model.manifest.name.clone(), reason: e };
        tokenizer.with_truncation(None).map_err(|e| fail(e.to_string()))?;
        let count = tokenizer.encode_fast(text, false).map(|e| e.len());
        tokenizer.with_truncation(truncation).map_err(|e| fail(e.to_string()))?;
        count.map_err(|e| fail(e.to_string()))
    }
}

/// A cross-encoder: (query, passage) → relevance score (the model's raw logit; higher is more relevant).
pub struct CrossEncoder {
    model: Loaded,
}

impl CrossEncoder {
    pub fn load(env: &Environment, dir: &Path, options: SessionOptions) -> Result<Self> {
        Ok(CrossEncoder { model: Loaded::open(env, dir, ModelKind::CrossEncoder, options)? })
    }

    loaded_accessors!();

    /// Bounds every pair scored from now on to `max_tokens` tokens, special tokens included (the longer of query
    /// and passage is cut first); 0 or more than the model's limit: the model's limit.
    pub fn set_max_tokens(&mut self, max_tokens: usize) -> Result<()> {
        let limit = self.model.manifest.max_tokens;
        let wanted = if max_tokens == 0 { limit } else { max_tokens.min(limit) };
        if self.model.tokenizer.get_truncation().map(|t| t.max_length) == Some(wanted) {
            return Ok(());
        }
        self.model
            .tokenizer
            .with_truncation(Some(truncation(wanted)))
            .map(|_| ())
            .map_err(|e| ModelError::Tokenizer { name: self.model.manifest.name.clone(), reason: e.to_string() })
    }

    /// Scores any number of passages against `query` in runs within `limits` (see [`plan_runs`]), calling
    /// `between` before each run and between tokenization chunks; scores come back in input order. Each pair is
    /// encoded with token_type_ids 0/1 and truncated (longest side first) to the model's limit.
    pub fn score(
        &mut self,
        query: &str,
        passages: &[&str],
        limits: RunLimits,
        between: &mut dyn FnMut(),
    ) -> Result<Vec<f32>> {
        let pairs: Vec<(&str, &str)> = passages.iter().map(|&p| (query, p)).collect();
        self.score_pairs(&pairs, limits, between)
    }

    /// Scores (query, passage) pairs that may belong to different queries, as [`CrossEncoder::score`] does: the
    /// shared worker batches pairs of several sessions' queries into the same runs.
    pub fn score_pairs(
        &mut self,
        pairs: &[(&str, &str)],
        limits: RunLimits,
        between: &mut dyn FnMut(),
    ) -> Result<Vec<f32>> {
        let tokens =
            self.model.tokenize(pairs.len(), |i| pairs[i], |i| pairs[i].0.len() + pairs[i].1.len(), between)?;
        self.model.run_all(&tokens, limits, between, |rows, shape, logits, _| {
            if shape.first().copied() != Some(rows as i64) || logits.len() != rows {
                return Err(format!("expected one logit per pair, got shape {shape:?}"));
            }
            Ok(logits.to_vec())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_rows: usize, max_tokens: usize) -> RunLimits {
        RunLimits { max_rows, max_tokens }
    }

    /// Every index exactly once, each run within both limits unless it is a single input.
    fn check(lengths: &[usize], l: RunLimits) -> Vec<Vec<usize>> {
        let runs = plan_runs(lengths, l);
        let mut seen: Vec<usize> = runs.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..lengths.len()).collect::<Vec<_>>());
        for run in &runs {
            assert!(!run.is_empty());
            let longest = run.iter().map(|&i| lengths[i]).max().unwrap();
            assert!(run.len() == 1 || (run.len() <= l.max_rows && run.len() * longest <= l.max_tokens), "{run:?}");
        }
        runs
    }

    #[test]
    fn nothing_to_run() {
        assert!(plan_runs(&[], limits(64, 8192)).is_empty());
    }

    #[test]
    fn short_inputs_are_bounded_by_rows() {
        let lengths = vec![30; 130];
        let runs = check(&lengths, limits(64, 8192));
        assert_eq!(runs.iter().map(Vec::len).collect::<Vec<_>>(), [64, 64, 2]);
    }

    #[test]
    fn long_inputs_are_bounded_by_padded_tokens() {
        let lengths = vec![512; 100];
        let runs = check(&lengths, limits(64, 4096));
        assert_eq!(runs.len(), 13);
        assert!(runs[..12].iter().all(|r| r.len() == 8));
    }

    #[test]
    fn an_input_longer_than_the_budget_runs_alone() {
        let runs = check(&[10, 600, 10], limits(64, 512));
        assert_eq!(runs, [vec![0, 2], vec![1]]);
        // Zero limits count as 1: one input per run, nothing lost.
        assert_eq!(check(&[3, 1, 2], limits(0, 0)), [vec![1], vec![2], vec![0]]);
    }

    #[test]
    fn runs_are_shortest_first_with_ties_in_input_order() {
        let lengths = [40, 7, 512, 7, 300, 40, 8];
        let runs = check(&lengths, limits(3, 1024));
        // 7, 7, 8 | 40, 40, 300 (3 x 300 = 900 <= 1024) | 512 (a fourth row is over max_rows anyway).
        assert_eq!(runs[0], [1, 3, 6]);
        assert_eq!(runs[1], [0, 5, 4]);
        assert_eq!(runs[2], [2]);
        // Mixed lengths: a long newcomer closes the run when rows x its length would exceed the budget.
        let runs = check(&[100, 100, 100, 400], limits(64, 600));
        assert_eq!(runs, [vec![0, 1, 2], vec![3]]);
    }
}

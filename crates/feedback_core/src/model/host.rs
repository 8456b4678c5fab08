//! The seam between callers and whoever runs the models.

use std::path::PathBuf;

use super::encoder::{CrossEncoder, Embedder, RunLimits, SessionOptions, TextRole};
use super::error::{ModelError, Result};
use super::manifest::Manifest;
use super::pin::{model_key, parse_model};
use super::runtime;

/// Where models and the runtime live, and how to run them. Read from settings on every call, so a changed
/// setting takes effect on the next call (a changed runtime library: in new sessions only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostConfig {
    pub runtime_library: PathBuf,
    pub model_dir: PathBuf,
    pub intra_threads: usize,
    /// Width every embedding model must produce.
    pub dimensions: usize,
    /// Most texts per model run.
    pub batch_size: usize,
    /// Most padded tokens (rows x longest row) per model run: bounds a run's memory whatever the texts' length.
    pub max_batch_tokens: usize,
    /// Most tokens of a cross-encoder pair, query and passage together (the longer side is cut first); 0: the
    /// model's own limit. Reranking cost grows with pair length.
    pub max_pair_tokens: usize,
}

impl HostConfig {
    /// How calls are split into model runs, for embedding and reranking alike.
    pub fn run_limits(&self) -> RunLimits {
        RunLimits { max_rows: self.batch_size.max(1), max_tokens: self.max_batch_tokens.max(1) }
    }
}

/// What a host has done so far (per process for [`LocalHost`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostStats {
    /// Embedding model runs (each within the run limits), and texts embedded by them.
    pub embed_runs: u64,
    pub texts_embedded: u64,
    /// Cross-encoder runs (each within the run limits), and pairs scored by them.
    pub rerank_runs: u64,
    pub pairs_scored: u64,
    /// Sessions currently loaded (embedding, cross-encoder).
    pub loaded_embedders: usize,
    pub loaded_cross_encoders: usize,
}

impl HostStats {
    pub const ZERO: HostStats = HostStats {
        embed_runs: 0,
        texts_embedded: 0,
        rerank_runs: 0,
        pairs_scored: 0,
        loaded_embedders: 0,
        loaded_cross_encoders: 0,
    };
}

/// Runs models on behalf of callers. The extension talks to models only through this trait.
pub trait ModelHost {
    /// Embeds `texts` in runs within `cfg.run_limits()`, in input order. `between` is called before each model
    /// run and between tokenization chunks: the extension checks for query cancellation there.
    fn embed(
        &mut self,
        cfg: &HostConfig,
        model: &str,
        texts: &[&str],
        role: TextRole,
        between: &mut dyn FnMut(),
    ) -> Result<Vec<Vec<f32>>>;
    /// Cross-encoder scores of every passage against `query`, in input order, in runs within `cfg.run_limits()`;
    /// `between` as for [`ModelHost::embed`].
    fn rerank(
        &mut self,
        cfg: &HostConfig,
        model: &str,
        query: &str,
        passages: &[&str],
        between: &mut dyn FnMut(),
    ) -> Result<Vec<f32>> {
        let pairs: Vec<(&str, &str)> = passages.iter().map(|&p| (query, p)).collect();
        self.rerank_pairs(cfg, model, &pairs, between)
    }
    /// Cross-encoder scores of (query, passage) pairs, possibly of different queries, in input order.
    fn rerank_pairs(
        &mut self,
        cfg: &HostConfig,
        model: &str,
        pairs: &[(&str, &str)],
        between: &mut dyn FnMut(),
    ) -> Result<Vec<f32>>;
    /// Tokens the embedding model's tokenizer makes of `text` (special tokens excluded). One text, one tokenizer
    /// pass, no model run: callers that count in a loop check for cancellation in their loop.
    fn count_tokens(&mut self, cfg: &HostConfig, model: &str, text: &str) -> Result<usize>;
    fn stats(&self) -> HostStats;
}

/// Runs models in the calling process. Sessions are created on first use and kept in small bounded lists
/// (most recently used first), so switching models back and forth does not reload and memory stays bounded.
pub struct LocalHost {
    embedders: Vec<(Key, Embedder)>,
    cross_encoders: Vec<(Key, CrossEncoder)>,
    stats: HostStats,
    cpu_arena: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    dir: PathBuf,
    options: SessionOptions,
}

/// At most this many sessions of each kind stay loaded: two models (a model switch embeds with both), each with
/// two thread counts (the inference worker's runners embed with more threads when the others are idle).
const CAPACITY: usize = 4;

/// ONNX Runtime's CPU memory arena stays on (ORT's default); large calls shrink it when they end (see
/// `SHRINK_ABOVE_TOKENS` in encoder.rs). Turning it off was measured worse (`examples/peak_rss.rs`, bge-small and
/// the L-12 cross-encoder, 1 thread): every tensor becomes a fresh malloc, and the page faults made long texts
/// 1.4-2.3x slower (256 texts of ~300 tokens: 4.6-7.4 instead of 8.6-10.8 texts/s; 1000-passage rerank at 4096
/// tokens per run: 3.4 instead of 4.9 pairs/s). Nor was the peak lower where it matters: 358-389 MB instead of
/// 171 MB for 1000 short notes, 716 instead of 407 MB for the rerank; only long embeddings at 4096+ tokens per
/// run peaked 10-15% lower. At the recommended 1024 tokens per run the arena adds nothing above the load-time peak.
pub const CPU_ARENA: bool = true;

impl Default for LocalHost {
    fn default() -> Self {
        Self::new()
    }
}

impl LocalHost {
    pub const fn new() -> Self {
        LocalHost { embedders: Vec::new(), cross_encoders: Vec::new(), stats: HostStats::ZERO, cpu_arena: CPU_ARENA }
    }

    /// Turns ONNX Runtime's CPU memory arena on or off for sessions loaded from now on (default: on, see
    /// [`CPU_ARENA`]); a session loaded with the other value is reloaded on its next use. For measurements.
    pub fn set_cpu_arena(&mut self, enabled: bool) {
        self.cpu_arena = enabled;
    }

    /// `model` is a folder name, or a pinned key `name@sha256`: then the loaded session's weights (checked against
    /// their manifest's sha256 when they were loaded) must be the pinned ones. Once the session is loaded that
    /// check reads no file: it compares the checksum the session was verified against.
    pub fn embedder(&mut self, cfg: &HostConfig, model: &str) -> Result<&mut Embedder> {
        let (name, pinned) = parse_model(model)?;
        let embedder = cached(&mut self.embedders, key(cfg, name, self.cpu_arena)?, |k| {
            // Files replaced under the pinned name are refused before their graph is parsed: the new graph may
            // not even load, and that would hide what happened.
            if pinned {
                let installed = model_key(name, &Manifest::read(&k.dir)?);
                if installed != model {
                    return Err(ModelError::Changed { pinned: model.to_string(), installed });
                }
            }
            Embedder::load(&runtime::environment(&cfg.runtime_library)?, &k.dir, k.options, cfg.dimensions)
        })?;
        let loaded = model_key(name, embedder.manifest());
        if pinned && loaded != model {
            return Err(ModelError::Changed { pinned: model.to_string(), installed: loaded });
        }
        Ok(embedder)
    }

    /// The sessions loaded now, most recently used first: (kind, key `folder@sha256` of the weights).
    pub fn loaded(&self) -> Vec<(&'static str, String)> {
        let folder = |k: &Key| k.dir.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        let embedders = self.embedders.iter().map(|(k, e)| ("embedding", model_key(&folder(k), e.manifest())));
        let cross = self.cross_encoders.iter().map(|(k, c)| ("cross-encoder", model_key(&folder(k), c.manifest())));
        embedders.chain(cross).collect()
    }

    pub fn cross_encoder(&mut self, cfg: &HostConfig, model: &str) -> Result<&mut CrossEncoder> {
        cached(&mut self.cross_encoders, key(cfg, model, self.cpu_arena)?, |k| {
            CrossEncoder::load(&runtime::environment(&cfg.runtime_library)?, &k.dir, k.options)
        })
    }
}

impl ModelHost for LocalHost {
    fn embed(
        &mut self,
        cfg: &HostConfig,
        model: &str,
        texts: &[&str],
        role: TextRole,
        between: &mut dyn FnMut(),
    ) -> Result<Vec<Vec<f32>>> {
        let embedder = self.embedder(cfg, model)?;
        let before = embedder.runs();
        let vectors = in_chunks(texts, cfg, |chunk| embedder.embed(chunk, role, cfg.run_limits(), between));
        // Runs made before a failure count too (a cancellation unwinds past this: not counted).
        self.stats.embed_runs += embedder.runs() - before;
        let vectors = vectors?;
        self.stats.texts_embedded += texts.len() as u64;
        Ok(vectors)
    }

    fn rerank_pairs(
        &mut self,
        cfg: &HostConfig,
        model: &str,
        pairs: &[(&str, &str)],
        between: &mut dyn FnMut(),
    ) -> Result<Vec<f32>> {
        let cross_encoder = self.cross_encoder(cfg, model)?;
        cross_encoder.set_max_tokens(cfg.max_pair_tokens)?;
        let before = cross_encoder.runs();
        let scores = in_chunks(pairs, cfg, |chunk| cross_encoder.score_pairs(chunk, cfg.run_limits(), between));
        self.stats.rerank_runs += cross_encoder.runs() - before;
        let scores = scores?;
        self.stats.pairs_scored += pairs.len() as u64;
        Ok(scores)
    }

    fn count_tokens(&mut self, cfg: &HostConfig, model: &str, text: &str) -> Result<usize> {
        self.embedder(cfg, model)?.count_tokens(text)
    }

    fn stats(&self) -> HostStats {
        HostStats {
            loaded_embedders: self.embedders.len(),
            loaded_cross_encoders: self.cross_encoders.len(),
            ..self.stats
        }
    }
}

/// A call's inputs in chunks of `cfg.batch_size`, each planned into runs on its own. Every host splits calls this
/// way, so a text meets the same run-mates whether its backend or the shared worker runs the model (the int8 graphs
/// quantize activations per run: run-mates change a vector slightly).
pub fn chunks<'a, T>(inputs: &'a [T], cfg: &HostConfig) -> std::slice::Chunks<'a, T> {
    inputs.chunks(cfg.batch_size.max(1))
}

/// Calls `run` on each of `inputs`' [`chunks`] in turn and concatenates what it returns, in input order; stops at
/// the first error. What a host counts (runs, inputs) it counts in `run` or around this call.
pub(crate) fn in_chunks<T, R>(
    inputs: &[T],
    cfg: &HostConfig,
    mut run: impl FnMut(&[T]) -> Result<Vec<R>>,
) -> Result<Vec<R>> {
    let mut all = Vec::with_capacity(inputs.len());
    for chunk in chunks(inputs, cfg) {
        all.extend(run(chunk)?);
    }
    Ok(all)
}

/// A model name is the name of a folder inside the model directory, nothing more.
pub(crate) fn validate_name(model: &str) -> Result<()> {
    let valid = !model.is_empty()
        && model != "."
        && model != ".."
        && model.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if valid {
        Ok(())
    } else {
        Err(ModelError::InvalidName { name: model.to_string() })
    }
}

fn key(cfg: &HostConfig, model: &str, cpu_arena: bool) -> Result<Key> {
    validate_name(model)?;
    let options = SessionOptions { intra_threads: cfg.intra_threads.max(1), cpu_arena };
    Ok(Key { dir: cfg.model_dir.join(model), options })
}

fn cached<T>(list: &mut Vec<(Key, T)>, key: Key, load: impl FnOnce(&Key) -> Result<T>) -> Result<&mut T> {
    match list.iter().position(|(k, _)| *k == key) {
        Some(i) => {
            let entry = list.remove(i);
            list.insert(0, entry);
        }
        None => {
            let value = load(&key)?;
            list.truncate(CAPACITY - 1);
            list.insert(0, (key, value));
        }
    }
    Ok(&mut list[0].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> HostConfig {
        HostConfig {
            runtime_library: "/nonexistent/libonnxruntime.so".into(),
            model_dir: "/models".into(),
            intra_threads: 1,
            dimensions: 384,
            batch_size: 64,
            max_batch_tokens: 8192,
            max_pair_tokens: 0,
        }
    }

    #[test]
    fn model_names_cannot_escape_the_model_dir() {
        for bad in ["", "..", "../etc", "a/b", "x y"] {
            assert!(matches!(key(&cfg(), bad, false), Err(ModelError::InvalidName { .. })), "{bad}");
        }
        assert_eq!(key(&cfg(), "bge-small-en-v1.5", false).unwrap().dir, PathBuf::from("/models/bge-small-en-v1.5"));
    }

    #[test]
    fn cache_is_bounded_and_most_recent_first() {
        let mut list: Vec<(Key, u32)> = Vec::new();
        let k = |d: &str| Key { dir: d.into(), options: SessionOptions { intra_threads: 1, cpu_arena: false } };
        let names = ["a", "b", "c", "d", "e"];
        assert_eq!(names.len(), CAPACITY + 1);
        for (i, d) in names.iter().enumerate() {
            cached(&mut list, k(d), |_| Ok(i as u32)).unwrap();
        }
        assert_eq!(list.len(), CAPACITY);
        assert_eq!(list[0].0, k("e"));
        // The least recently used went.
        assert!(list.iter().all(|(key, _)| *key != k("a")));
        // A hit does not load again.
        let v = *cached(&mut list, k("b"), |_| panic!("must not reload")).unwrap();
        assert_eq!(v, 1);
        assert_eq!(list[0].0, k("b"));
    }
}

//! The two model kinds pg_feedback runs: a bi-encoder that embeds texts, and a cross-encoder that scores
//! (query, passage) pairs. Both are a verified ONNX session plus the model's own tokenizer.

use std::borrow::Cow;
use std::path::Path;

use ort::environment::Environment;
use ort::session::{Session, SessionInputValue};
use ort::value::Tensor;
use tokenizers::{
    EncodeInput, Encoding, PaddingParams, PaddingStrategy, Tokenizer, TruncationParams, TruncationStrategy,
};

use super::error::{ModelError, Result};
use super::manifest::{Manifest, ModelKind};
use super::pooling::{l2_normalize, pool};

/// Whether a text is a search query or a stored document: some models (bge) prefix queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextRole {
    Query,
    Document,
}

/// A model folder loaded into memory: manifest, tokenizer (truncating to the model's limit, padding only to the
/// batch's longest input) and ONNX session.
struct Loaded {
    manifest: Manifest,
    tokenizer: Tokenizer,
    session: Session,
    input_names: Vec<String>,
}

impl Loaded {
    fn open(env: &Environment, dir: &Path, kind: ModelKind, threads: usize) -> Result<Self> {
        tokenizers::utils::parallelism::set_parallelism(false);
        let manifest = Manifest::read(dir)?;
        if manifest.kind != kind {
            return Err(ModelError::WrongKind {
                name: manifest.name.clone(),
                expected: kind.as_str(),
                actual: manifest.kind.as_str(),
            });
        }
        let tokenizer = Self::tokenizer(&manifest, &manifest.read_verified(dir, &manifest.tokenizer)?)?;
        let graph = manifest.read_verified(dir, &manifest.onnx)?;
        let fail = |e: String| ModelError::Inference { name: manifest.name.clone(), reason: e };
        let session = Session::builder(env)
            .map_err(|e| fail(e.to_string()))?
            .with_intra_threads(threads.max(1))
            .map_err(|e| fail(e.to_string()))?
            .with_inter_threads(1)
            .map_err(|e| fail(e.to_string()))?
            // Memory-pattern planning keeps per-shape buffers alive: ~37 MB more per backend, no speed gain here.
            .with_memory_pattern(false)
            .map_err(|e| fail(e.to_string()))?
            .commit_from_memory(&graph)
            .map_err(|e| fail(e.to_string()))?;
        let input_names = session.inputs().iter().map(|o| o.name().to_string()).collect();
        Ok(Loaded { manifest, tokenizer, session, input_names })
    }

    fn tokenizer(manifest: &Manifest, bytes: &[u8]) -> Result<Tokenizer> {
        let fail = |e: String| ModelError::Tokenizer { name: manifest.name.clone(), reason: e };
        let mut tokenizer = Tokenizer::from_bytes(bytes).map_err(|e| fail(e.to_string()))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: manifest.max_tokens,
                strategy: TruncationStrategy::LongestFirst,
                ..Default::default()
            }))
            .map_err(|e| fail(e.to_string()))?;
        // Some packaged tokenizer.json files pad every input to 512: pad to the batch's longest input only,
        // and always pass the real attention mask.
        let padding = tokenizer.get_padding().cloned().unwrap_or_default();
        tokenizer.with_padding(Some(PaddingParams { strategy: PaddingStrategy::BatchLongest, ..padding }));
        Ok(tokenizer)
    }

    fn encode<'s, E: Into<EncodeInput<'s>> + Send>(&self, inputs: Vec<E>) -> Result<Vec<Encoding>> {
        self.tokenizer
            .encode_batch(inputs, true)
            .map_err(|e| ModelError::Tokenizer { name: self.manifest.name.clone(), reason: e.to_string() })
    }

    /// Runs the graph on a padded batch; returns the requested output's shape and values plus the masks.
    fn run(&mut self, encodings: &[Encoding]) -> Result<(Vec<i64>, Vec<f32>, Vec<i64>)> {
        let batch = encodings.len();
        let seq = encodings.first().map_or(0, |e| e.len());
        let mut ids = Vec::with_capacity(batch * seq);
        let mut mask = Vec::with_capacity(batch * seq);
        let mut types = Vec::with_capacity(batch * seq);
        for e in encodings {
            ids.extend(e.get_ids().iter().map(|&x| x as i64));
            mask.extend(e.get_attention_mask().iter().map(|&x| x as i64));
            types.extend(e.get_type_ids().iter().map(|&x| x as i64));
        }
        let name = self.manifest.name.clone();
        let fail = |e: String| ModelError::Inference { name: name.clone(), reason: e };
        let mut inputs: Vec<(Cow<'static, str>, SessionInputValue<'static>)> = Vec::new();
        for input in &self.input_names {
            let data = match input.as_str() {
                "input_ids" => ids.clone(),
                "attention_mask" => mask.clone(),
                "token_type_ids" => types.clone(),
                other => return Err(fail(format!("unexpected graph input \"{other}\""))),
            };
            let tensor = Tensor::from_array(([batch, seq], data)).map_err(|e| fail(e.to_string()))?;
            inputs.push((Cow::Owned(input.clone()), tensor.into()));
        }
        let output_name = self.manifest.output.clone();
        let outputs = self.session.run(inputs).map_err(|e| fail(e.to_string()))?;
        let value =
            outputs.get(&output_name).ok_or_else(|| fail(format!("the graph has no output \"{output_name}\"")))?;
        let (shape, data) = value.try_extract_tensor::<f32>().map_err(|e| fail(e.to_string()))?;
        Ok((shape.to_vec(), data.to_vec(), mask))
    }
}

/// A bi-encoder: text → one L2-normalised vector.
pub struct Embedder {
    model: Loaded,
}

impl Embedder {
    /// Loads and verifies the model in `dir`, and checks that it really produces `expected_dims`-wide vectors.
    pub fn load(env: &Environment, dir: &Path, threads: usize, expected_dims: usize) -> Result<Self> {
        let model = Loaded::open(env, dir, ModelKind::Embedding, threads)?;
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
        let probe = embedder.embed(&["probe"], TextRole::Document)?;
        if probe[0].len() != expected_dims {
            return Err(ModelError::WrongDimensions { name, expected: expected_dims, actual: probe[0].len() });
        }
        Ok(embedder)
    }

    pub fn name(&self) -> &str {
        &self.model.manifest.name
    }

    /// Embeds `texts` in one model run. Queries get the model's query prefix; inputs longer than the model's
    /// limit are truncated; vectors are pooled as the manifest says and L2-normalised when it asks.
    pub fn embed(&mut self, texts: &[&str], role: TextRole) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let prefix = match role {
            TextRole::Query => self.model.manifest.query_prefix.as_str(),
            TextRole::Document => "",
        };
        let inputs: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
        let encodings = self.model.encode(inputs)?;
        let (shape, states, mask) = self.model.run(&encodings)?;
        let [batch, seq, hidden] = shape[..] else {
            return Err(ModelError::Inference {
                name: self.name().to_string(),
                reason: format!("expected a [batch, seq, hidden] output, got shape {shape:?}"),
            });
        };
        let (seq, hidden) = (seq as usize, hidden as usize);
        let pooling = self.model.manifest.pooling.expect("validated: embedding models have pooling");
        let normalize = self.model.manifest.normalize;
        Ok((0..batch as usize)
            .map(|i| {
                let mut v = pool(
                    &states[i * seq * hidden..(i + 1) * seq * hidden],
                    &mask[i * seq..(i + 1) * seq],
                    hidden,
                    pooling,
                );
                if normalize {
                    l2_normalize(&mut v);
                }
                v
            })
            .collect())
    }

    /// Embeds any number of texts in runs of at most `batch_size`, calling `between` before each run (the
    /// extension checks for query cancellation there). Texts are grouped by length so each run pads little;
    /// vectors come back in input order.
    pub fn embed_batched(
        &mut self,
        texts: &[&str],
        role: TextRole,
        batch_size: usize,
        between: &mut dyn FnMut(),
    ) -> Result<Vec<Vec<f32>>> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(batch_size.max(1)) {
            between();
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
            for (&i, v) in chunk.iter().zip(self.embed(&batch, role)?) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    /// Number of tokens the model's tokenizer makes of `text`, special tokens excluded, without truncation.
    /// Truncation and padding are switched off for the count and restored: one tokenizer per model, no copy.
    pub fn count_tokens(&mut self, text: &str) -> Result<usize> {
        let tokenizer = &mut self.model.tokenizer;
        let (truncation, padding) = (tokenizer.get_truncation().cloned(), tokenizer.get_padding().cloned());
        let fail = |e: String| ModelError::Tokenizer { name: self.model.manifest.name.clone(), reason: e };
        tokenizer.with_truncation(None).map_err(|e| fail(e.to_string()))?;
        tokenizer.with_padding(None);
        let count = tokenizer.encode(text, false).map(|e| e.len());
        tokenizer.with_truncation(truncation).map_err(|e| fail(e.to_string()))?;
        tokenizer.with_padding(padding);
        count.map_err(|e| fail(e.to_string()))
    }
}

/// A cross-encoder: (query, passage) → relevance score (the model's raw logit; higher is more relevant).
pub struct CrossEncoder {
    model: Loaded,
}

impl CrossEncoder {
    pub fn load(env: &Environment, dir: &Path, threads: usize) -> Result<Self> {
        Ok(CrossEncoder { model: Loaded::open(env, dir, ModelKind::CrossEncoder, threads)? })
    }

    pub fn name(&self) -> &str {
        &self.model.manifest.name
    }

    /// Scores every passage against `query` in one run; scores come back in input order. Each pair is encoded
    /// with token_type_ids 0/1 and truncated (longest side first) to the model's limit.
    pub fn score(&mut self, query: &str, passages: &[&str]) -> Result<Vec<f32>> {
        if passages.is_empty() {
            return Ok(Vec::new());
        }
        let pairs: Vec<(String, String)> = passages.iter().map(|p| (query.to_string(), p.to_string())).collect();
        let encodings = self.model.encode(pairs)?;
        let (shape, logits, _) = self.model.run(&encodings)?;
        if shape.first().copied() != Some(passages.len() as i64) || logits.len() != passages.len() {
            return Err(ModelError::Inference {
                name: self.name().to_string(),
                reason: format!("expected one logit per pair, got shape {shape:?}"),
            });
        }
        Ok(logits)
    }
}

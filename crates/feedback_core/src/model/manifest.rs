//! A model folder holds the ONNX graph, its `tokenizer.json` and a `manifest.json` that says how to use them.
//! Set-up writes the manifest (with the sha256 of every file); loading verifies every checksum.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::error::{ModelError, Result};

pub const MANIFEST_FILE: &str = "manifest.json";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    Embedding,
    CrossEncoder,
}

impl ModelKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ModelKind::Embedding => "embedding",
            ModelKind::CrossEncoder => "cross-encoder",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pooling {
    /// The hidden state of the first ([CLS]) token.
    Cls,
    /// The mean of the hidden states of the real (unmasked) tokens.
    Mean,
}

impl Pooling {
    pub fn as_str(self) -> &'static str {
        match self {
            Pooling::Cls => "cls",
            Pooling::Mean => "mean",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub name: String,
    pub kind: ModelKind,
    /// Width of the embedding (embedding models); 1 for a cross-encoder's single logit.
    pub dimensions: usize,
    #[serde(default)]
    pub pooling: Option<Pooling>,
    #[serde(default)]
    pub normalize: bool,
    /// Prepended to queries (not documents) before tokenizing; bge models need it.
    #[serde(default)]
    pub query_prefix: String,
    /// Longest input in tokens (special tokens included); longer inputs are truncated.
    pub max_tokens: usize,
    /// File name of the ONNX graph inside the model folder.
    pub onnx: String,
    /// File name of the Hugging Face `tokenizer.json` inside the model folder.
    pub tokenizer: String,
    /// Name of the graph output to read (`last_hidden_state` or `logits`).
    pub output: String,
    /// sha256 (hex) of every file the model needs, by file name.
    pub files: BTreeMap<String, String>,
    /// Where the files came from (package and version), for provenance.
    #[serde(default)]
    pub source: String,
}

impl Manifest {
    /// Reads and checks `<dir>/manifest.json` (structure only; see [`Manifest::read_verified`] for checksums).
    pub fn read(dir: &Path) -> Result<Manifest> {
        let path = dir.join(MANIFEST_FILE);
        match fs::metadata(&path) {
            Ok(meta) if meta.is_file() => {}
            // A folder the server may not read is not a missing model: say why it cannot be read.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return Err(io_error(&path, e)),
            _ => {
                let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                return Err(ModelError::NotFound { name, dir: dir.to_path_buf() });
            }
        }
        let text = fs::read_to_string(&path).map_err(|e| io_error(&path, e))?;
        let manifest: Manifest = serde_json::from_str(&text)
            .map_err(|e| ModelError::Manifest { path: path.clone(), reason: e.to_string() })?;
        manifest.validate(&path)?;
        Ok(manifest)
    }

    fn validate(&self, path: &Path) -> Result<()> {
        let bad = |reason: String| Err(ModelError::Manifest { path: path.to_path_buf(), reason });
        for file in [&self.onnx, &self.tokenizer] {
            if !self.files.contains_key(file) {
                return bad(format!("\"files\" has no checksum for \"{file}\""));
            }
        }
        for (file, sum) in &self.files {
            if file.contains('/') || file.contains("..") {
                return bad(format!("file name \"{file}\" must be a plain name inside the model folder"));
            }
            if sum.len() != 64 || !sum.bytes().all(|b| b.is_ascii_hexdigit()) {
                return bad(format!("checksum of \"{file}\" is not a sha256 hex digest"));
            }
        }
        if self.max_tokens < 8 {
            return bad(format!("max_tokens {} is too small", self.max_tokens));
        }
        if self.kind == ModelKind::Embedding && self.pooling.is_none() {
            return bad("an embedding model needs \"pooling\" (cls or mean)".into());
        }
        Ok(())
    }

    /// Reads one of the model's files and checks it against the manifest's sha256.
    pub fn read_verified(&self, dir: &Path, file: &str) -> Result<Vec<u8>> {
        let path = dir.join(file);
        let bytes = fs::read(&path).map_err(|e| io_error(&path, e))?;
        let actual = sha256_hex(&bytes);
        let expected = self.files.get(file).cloned().unwrap_or_default();
        if !actual.eq_ignore_ascii_case(&expected) {
            return Err(ModelError::Checksum { path, expected, actual });
        }
        Ok(bytes)
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn io_error(path: &Path, e: std::io::Error) -> ModelError {
    ModelError::Io { path: PathBuf::from(path), reason: e.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The temporary folder `name`, with whatever an earlier run left there removed (not created).
    fn fresh_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(name);
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn write(dir: &Path, name: &str, body: &str) {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join(name), body).unwrap();
    }

    fn manifest_json(sum: &str) -> String {
        format!(
            r#"{{"name":"m","kind":"embedding","dimensions":384,"pooling":"cls","normalize":true,
                "max_tokens":512,"onnx":"model.onnx","tokenizer":"tokenizer.json","output":"last_hidden_state",
                "files":{{"model.onnx":"{sum}","tokenizer.json":"{sum}"}}}}"#
        )
    }

    /// The model folder `name` with a model.onnx of "real bytes", and its manifest, which records the checksum of
    /// `recorded` for it.
    fn model_with_checksum_of(name: &str, recorded: &[u8]) -> (PathBuf, Manifest) {
        let dir = fresh_dir(name);
        write(&dir, "model.onnx", "real bytes");
        write(&dir, MANIFEST_FILE, &manifest_json(&sha256_hex(recorded)));
        let m = Manifest::read(&dir).unwrap();
        (dir, m)
    }

    #[test]
    fn missing_manifest_is_not_found() {
        let dir = fresh_dir("fb_manifest_missing");
        fs::create_dir_all(&dir).unwrap();
        assert!(matches!(Manifest::read(&dir), Err(ModelError::NotFound { .. })));
    }

    #[test]
    fn checksum_mismatch_is_refused() {
        let (dir, m) = model_with_checksum_of("fb_manifest_checksum", b"other bytes");
        let err = m.read_verified(&dir, "model.onnx").unwrap_err();
        assert!(matches!(err, ModelError::Checksum { .. }), "{err}");
    }

    #[test]
    fn matching_checksum_is_accepted() {
        let (dir, m) = model_with_checksum_of("fb_manifest_ok", b"real bytes");
        assert_eq!(m.read_verified(&dir, "model.onnx").unwrap(), b"real bytes");
    }

    #[test]
    fn unknown_field_and_bad_digest_are_refused() {
        let dir = fresh_dir("fb_manifest_bad");
        write(&dir, MANIFEST_FILE, &manifest_json("xyz"));
        assert!(matches!(Manifest::read(&dir), Err(ModelError::Manifest { .. })));
        write(&dir, MANIFEST_FILE, &manifest_json(&sha256_hex(b"")).replace("\"name\"", "\"nmae\""));
        assert!(matches!(Manifest::read(&dir), Err(ModelError::Manifest { .. })));
    }
}

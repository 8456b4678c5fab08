//! Pinned models. A model is pinned by its folder name and the sha256 of its weights (the ONNX graph, as its
//! manifest records it), written `name@sha256`. Notes record the key of the model that embedded them, so vectors
//! of two models (or of two builds of one model under the same name) are never compared.

use super::error::{ModelError, Result};
use super::host::{validate_name, HostConfig};
use super::manifest::{Manifest, ModelKind};

/// `name@sha256` of a model whose manifest is `manifest`.
pub fn model_key(name: &str, manifest: &Manifest) -> String {
    format!("{name}@{}", manifest.files.get(&manifest.onnx).map(String::as_str).unwrap_or_default())
}

/// The folder name and weights checksum of a key; None when `key` is not `name@<64 hex digits>`.
pub fn split_key(key: &str) -> Option<(&str, &str)> {
    let (name, sha) = key.rsplit_once('@')?;
    (!name.is_empty() && sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit())).then_some((name, sha))
}

/// The key of the embedding model installed as `name` (a folder name, or a key whose name part is used), after
/// checking it is an embedding model of the configured width.
pub fn installed_key(cfg: &HostConfig, name: &str) -> Result<String> {
    let name = split_key(name).map_or(name, |(n, _)| n);
    validate_name(name)?;
    let manifest = Manifest::read(&cfg.model_dir.join(name))?;
    if manifest.kind != ModelKind::Embedding {
        return Err(ModelError::WrongKind {
            name: name.to_string(),
            expected: ModelKind::Embedding.as_str().to_string(),
            actual: manifest.kind.as_str().to_string(),
        });
    }
    if manifest.dimensions != cfg.dimensions {
        return Err(ModelError::WrongDimensions {
            name: name.to_string(),
            expected: cfg.dimensions,
            actual: manifest.dimensions,
        });
    }
    Ok(model_key(name, &manifest))
}

/// The folder name to load for `model`, a folder name or a pinned key, and the key when it is one. A name with
/// an `@` that is no key is refused.
pub(crate) fn parse_model(model: &str) -> Result<(&str, bool)> {
    match split_key(model) {
        Some((name, _)) => Ok((name, true)),
        None if model.contains('@') => Err(ModelError::InvalidKey { key: model.to_string() }),
        None => Ok((model, false)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_into_name_and_checksum() {
        let sha = "ab".repeat(32);
        assert_eq!(split_key(&format!("bge-small-en-v1.5@{sha}")), Some(("bge-small-en-v1.5", sha.as_str())));
        assert_eq!(split_key("bge-small-en-v1.5"), None);
        assert_eq!(split_key(&format!("@{sha}")), None);
        assert_eq!(split_key("m@abc"), None);
        assert_eq!(split_key(&format!("m@{}", "zz".repeat(32))), None);
    }
}

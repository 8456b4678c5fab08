use std::path::PathBuf;

/// Everything that can go wrong while loading or running a model.
///
/// The extension maps each variant to a SQLSTATE and a hint naming the setting to fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum ModelError {
    #[error("could not load ONNX Runtime from \"{path}\": {reason}")]
    Runtime { path: PathBuf, reason: String },

    #[error("invalid model name \"{name}\": use the name of a folder in the model directory")]
    InvalidName { name: String },

    #[error("model \"{name}\" is not installed")]
    NotFound { name: String, dir: PathBuf },

    #[error("invalid model manifest \"{path}\": {reason}")]
    Manifest { path: PathBuf, reason: String },

    #[error("checksum mismatch for model file \"{path}\": manifest says {expected}, file has {actual}")]
    Checksum { path: PathBuf, expected: String, actual: String },

    #[error("could not read model file \"{path}\": {reason}")]
    Io { path: PathBuf, reason: String },

    #[error("model \"{name}\" has kind {actual}, but kind {expected} is required here")]
    WrongKind { name: String, expected: String, actual: String },

    #[error("model \"{name}\" produces {actual}-wide vectors, but pg_feedback stores {expected}-wide vectors")]
    WrongDimensions { name: String, expected: usize, actual: usize },

    #[error("could not load tokenizer of model \"{name}\": {reason}")]
    Tokenizer { name: String, reason: String },

    #[error("\"{key}\" is not a pinned model key (name@sha256)")]
    InvalidKey { key: String },

    #[error("the installed model is not the pinned one: pinned {pinned}, installed {installed}")]
    Changed { pinned: String, installed: String },

    #[error("inference failed in model \"{name}\": {reason}")]
    Inference { name: String, reason: String },

    /// The call was cancelled while a host ran it (see `cancel`): its caller stopped waiting.
    #[error("the model call was cancelled")]
    Cancelled,

    /// The shared inference worker could not answer (not running, restarted mid-request, or a protocol error).
    #[error("the pg_feedback inference worker {reason}")]
    Worker { reason: String },
}

impl ModelError {
    /// Where the problem is on disk, for an error's DETAIL (kept out of the message so messages are stable).
    pub fn detail(&self) -> Option<String> {
        match self {
            ModelError::NotFound { dir, .. } => Some(format!("No manifest.json in \"{}\".", dir.display())),
            _ => None,
        }
    }
}

pub type Result<T, E = ModelError> = std::result::Result<T, E>;

//! pg_feedback's one error type. Every user-facing error carries a SQLSTATE, a message naming the bad value,
//! and a hint naming what to change.

use feedback_core::model::ModelError;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};

#[derive(Debug, thiserror::Error)]
pub enum FbError {
    /// A model failed to load or run; `setting` names the setting that chose it.
    #[error("{source}")]
    Model { setting: &'static str, source: ModelError },

    /// A function argument out of its range.
    #[error("{message}")]
    InvalidArgument { message: String, hint: String },

    /// An input larger than a configured limit (pg_feedback.max_input_bytes).
    #[error("{message}")]
    LimitExceeded { message: String, hint: String },

    /// Something the call needs is switched off (e.g. no cross-encoder configured).
    #[error("{message}")]
    NotConfigured { message: String, hint: String },
}

impl FbError {
    pub fn model(setting: &'static str) -> impl FnOnce(ModelError) -> FbError {
        move |source| FbError::Model { setting, source }
    }

    fn sqlstate(&self) -> PgSqlErrorCode {
        use PgSqlErrorCode::*;
        match self {
            FbError::Model { source, .. } => match source {
                ModelError::Runtime { .. } => ERRCODE_CONFIG_FILE_ERROR,
                ModelError::InvalidName { .. } | ModelError::WrongKind { .. } | ModelError::InvalidKey { .. } => {
                    ERRCODE_INVALID_PARAMETER_VALUE
                }
                ModelError::Changed { .. } => ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                ModelError::NotFound { .. } => ERRCODE_UNDEFINED_FILE,
                ModelError::Manifest { .. } => ERRCODE_CONFIG_FILE_ERROR,
                ModelError::Checksum { .. } => ERRCODE_DATA_CORRUPTED,
                ModelError::Io { .. } => ERRCODE_IO_ERROR,
                ModelError::WrongDimensions { .. } => ERRCODE_DATA_EXCEPTION,
                ModelError::Tokenizer { .. } | ModelError::Inference { .. } => ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
                ModelError::Worker { .. } => ERRCODE_SYSTEM_ERROR,
                ModelError::Cancelled => ERRCODE_QUERY_CANCELED,
            },
            FbError::InvalidArgument { .. } => ERRCODE_INVALID_PARAMETER_VALUE,
            FbError::LimitExceeded { .. } => ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            FbError::NotConfigured { .. } => ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        }
    }

    fn hint(&self) -> String {
        match self {
            FbError::Model { setting, source } => match source {
                ModelError::Runtime { .. } => "Set pg_feedback.onnxruntime_library (superuser) to the absolute path \
                    of libonnxruntime.so (1.17 or newer), then start a new session."
                    .into(),
                ModelError::InvalidName { .. } | ModelError::NotFound { .. } | ModelError::WrongKind { .. } => {
                    format!("Set {setting} to one of the models installed in pg_feedback.model_dir (see fb_models()).")
                }
                ModelError::Manifest { .. } | ModelError::Checksum { .. } | ModelError::Io { .. } => format!(
                    "The files of the model named by {setting} are damaged, incomplete or unreadable by the \
                     server's OS user: reinstall them (make setup), fix their permissions, or point \
                     pg_feedback.model_dir at an intact copy."
                ),
                ModelError::WrongDimensions { .. } => {
                    format!("Set {setting} to a model that produces {}-wide vectors.", crate::gucs::DIMENSIONS)
                }
                ModelError::InvalidKey { .. } => {
                    "Name a model by its folder (see fb_models()) or by its key name@sha256 (fb_embedding_model())."
                        .into()
                }
                ModelError::Changed { .. } => "The files under the pinned model's name were replaced. Reinstall the \
                    pinned version, or re-embed the notes with the installed one: CALL fb_reembed('<name>') then \
                    SELECT fb_switch_model('<name>') (superuser)."
                    .into(),
                ModelError::Tokenizer { .. } | ModelError::Inference { .. } => {
                    format!(
                        "Check that the model named by {setting} is a BERT-style ONNX export with its tokenizer.json."
                    )
                }
                ModelError::Cancelled => "The statement was cancelled (pg_cancel_backend or statement_timeout) while \
                    the model ran it."
                    .into(),
                ModelError::Worker { .. } => "Retry the statement: the postmaster restarts the worker within seconds. \
                    SELECT * FROM feedback_worker shows its state; the server log says why it stopped. \
                    SET pg_feedback.inference = backend (superuser) runs models in this session instead."
                    .into(),
            },
            FbError::InvalidArgument { hint, .. }
            | FbError::LimitExceeded { hint, .. }
            | FbError::NotConfigured { hint, .. } => hint.clone(),
        }
    }

    pub fn limit_exceeded(message: impl Into<String>, hint: impl Into<String>) -> FbError {
        FbError::LimitExceeded { message: message.into(), hint: hint.into() }
    }

    pub fn invalid_argument(message: impl Into<String>, hint: impl Into<String>) -> FbError {
        FbError::InvalidArgument { message: message.into(), hint: hint.into() }
    }

    /// Raises this error as a Postgres ERROR (does not return).
    pub fn report(self) -> ! {
        let mut report = ErrorReport::new(self.sqlstate(), self.to_string(), "pg_feedback").set_hint(self.hint());
        if let FbError::Model { source, .. } = &self {
            if let Some(detail) = source.detail() {
                report = report.set_detail(detail);
            }
        }
        report.report(PgLogLevel::ERROR);
        unreachable!("ERROR does not return")
    }
}

pub trait OrReport<T> {
    /// The value, or the error raised as a Postgres ERROR.
    fn or_report(self) -> T;
}

impl<T> OrReport<T> for Result<T, FbError> {
    fn or_report(self) -> T {
        self.unwrap_or_else(|e| e.report())
    }
}

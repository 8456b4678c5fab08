//! The ONNX Runtime library, loaded once per process from a path chosen at run time (`load-dynamic`).

use std::path::Path;
use std::sync::Mutex;

use ort::environment::Environment;

use super::error::{ModelError, Result};

static ENVIRONMENT: Mutex<Option<Environment>> = Mutex::new(None);

/// Loads libonnxruntime from `library` (first call only) and returns the process's ONNX Runtime environment.
///
/// A failed load is not remembered, so a corrected path works on the next call. Once loaded, the library
/// stays for the life of the process.
pub fn environment(library: &Path) -> Result<Environment> {
    let mut slot = ENVIRONMENT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(env) = slot.as_ref() {
        return Ok(env.clone());
    }
    let fail = |reason: String| ModelError::Runtime { path: library.to_path_buf(), reason };
    if !library.is_absolute() {
        return Err(fail("the path must be absolute".into()));
    }
    if !library.is_file() {
        return Err(fail("no such file".into()));
    }
    let env = ort::init_from(library)
        .map_err(|e| fail(e.to_string()))?
        .with_name("pg_feedback")
        .with_telemetry(false)
        .build()
        .map_err(|e| fail(e.to_string()))?;
    *slot = Some(env.clone());
    Ok(env)
}

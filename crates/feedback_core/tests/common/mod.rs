//! Where the real models and ONNX Runtime are: set by `make test` (FB_MODEL_DIR, FB_ORT_LIBRARY).
use std::path::PathBuf;

use feedback_core::model::HostConfig;

pub fn config() -> HostConfig {
    let var = |name: &str| {
        PathBuf::from(std::env::var(name).unwrap_or_else(|_| {
            panic!("{name} is not set: run these tests through `make test` (it installs the models)")
        }))
    };
    HostConfig {
        runtime_library: var("FB_ORT_LIBRARY"),
        model_dir: var("FB_MODEL_DIR"),
        intra_threads: 1,
        dimensions: 384,
        batch_size: 4,
        max_batch_tokens: 8192,
        max_pair_tokens: 0,
    }
}

#[allow(dead_code)] // not every test binary reads fixtures
pub fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

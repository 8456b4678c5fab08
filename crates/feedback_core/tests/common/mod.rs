//! Where the real models and ONNX Runtime are: set by `make test` (FB_MODEL_DIR, FB_ORT_LIBRARY).
use std::path::PathBuf;

use feedback_core::model::remote::{Job, Request};
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
/// The instruction set whose int8 kernels ONNX Runtime runs on this machine, as tests/e2e/harness.py (isa)
/// names it: "avx512vnni" or "avx2".
#[allow(dead_code)] // only the reference tests read it
pub fn isa() -> &'static str {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = cpuinfo.lines().find(|l| l.starts_with("flags")).unwrap_or("");
    if flags.split_whitespace().any(|f| f == "avx512_vnni") {
        "avx512vnni"
    } else {
        "avx2"
    }
}

pub fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A request of `job` for `model`, with the model directory and limits of `cfg`, as a host configured so sends it.
#[allow(dead_code)] // only the tests of the shared worker send requests
pub fn request(cfg: &HostConfig, model: &str, job: Job) -> Request {
    Request {
        model: model.into(),
        model_dir: cfg.model_dir.clone(),
        max_rows: cfg.batch_size,
        max_tokens: cfg.max_batch_tokens,
        max_pair_tokens: cfg.max_pair_tokens,
        job,
    }
}

//! Broken set-ups give clean errors, never a crash. Own test binary: the runtime must not be loaded yet.

mod common;

use std::fs;

use feedback_core::model::{LocalHost, ModelError, ModelHost, TextRole};

#[test]
fn broken_setups_are_clean_errors() {
    let good = common::config();
    let mut host = LocalHost::new();

    // Wrong runtime library path (before any successful load in this process).
    let mut cfg = good.clone();
    cfg.runtime_library = "/nonexistent/libonnxruntime.so".into();
    let err = host.embed(&cfg, "bge-small-en-v1.5", &["x"], TextRole::Document, &mut || {}).unwrap_err();
    assert!(matches!(err, ModelError::Runtime { .. }), "{err}");
    cfg.runtime_library = "relative/libonnxruntime.so".into();
    let err = host.embed(&cfg, "bge-small-en-v1.5", &["x"], TextRole::Document, &mut || {}).unwrap_err();
    assert!(matches!(err, ModelError::Runtime { .. }), "{err}");

    // A corrupt model file: copy a real model, flip its bytes.
    let tmp = std::env::temp_dir().join(format!("fb_model_errors_{}", std::process::id()));
    let dir = tmp.join("bge-small-en-v1.5");
    fs::create_dir_all(&dir).unwrap();
    for f in ["manifest.json", "tokenizer.json", "model.onnx"] {
        fs::copy(good.model_dir.join("bge-small-en-v1.5").join(f), dir.join(f)).unwrap();
    }
    let mut bytes = fs::read(dir.join("model.onnx")).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    fs::write(dir.join("model.onnx"), bytes).unwrap();
    let mut cfg = good.clone();
    cfg.model_dir = tmp.clone();
    let err = host.embed(&cfg, "bge-small-en-v1.5", &["x"], TextRole::Document, &mut || {}).unwrap_err();
    assert!(matches!(err, ModelError::Checksum { .. }), "{err}");

    // A model whose vectors are not 384 wide.
    let mut cfg = good.clone();
    cfg.dimensions = 768;
    let err = host.embed(&cfg, "bge-small-en-v1.5", &["x"], TextRole::Document, &mut || {}).unwrap_err();
    assert!(matches!(err, ModelError::WrongDimensions { actual: 384, .. }), "{err}");

    // A cross-encoder asked to embed, a missing model.
    let err = host.embed(&good, "ms-marco-MiniLM-L-12-v2", &["x"], TextRole::Document, &mut || {}).unwrap_err();
    assert!(matches!(err, ModelError::WrongKind { .. }), "{err}");
    let err = host.embed(&good, "no-such-model", &["x"], TextRole::Document, &mut || {}).unwrap_err();
    assert!(matches!(err, ModelError::NotFound { .. }), "{err}");

    // And the good set-up still works afterwards.
    let v = host.embed(&good, "bge-small-en-v1.5", &["x"], TextRole::Document, &mut || {}).unwrap();
    assert_eq!(v[0].len(), 384);
    fs::remove_dir_all(&tmp).unwrap();
}

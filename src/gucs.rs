//! Every `pg_feedback.*` setting, in one place, with typed accessors.

use std::ffi::{c_char, CStr, CString};
use std::path::PathBuf;

use feedback_core::model::HostConfig;
use pgrx::{pg_sys, GucContext, GucFlags, GucRegistry, GucSetting};

/// Width of `feedback_notes.embedding`; every embedding model must produce vectors this wide.
pub const DIMENSIONS: usize = 384;

static MODEL_DIR: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static RUNTIME_LIBRARY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static EMBEDDING_MODEL: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"bge-small-en-v1.5"));
static RERANK_MODEL: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"ms-marco-MiniLM-L-12-v2"));
static INTRA_THREADS: GucSetting<i32> = GucSetting::<i32>::new(1);
static QUERY_CACHE_SIZE: GucSetting<i32> = GucSetting::<i32>::new(1000);
static RERANK: GucSetting<bool> = GucSetting::<bool>::new(true);
static RERANK_FLOOR: GucSetting<f64> = GucSetting::<f64>::new(DEFAULT_RERANK_FLOOR);
static COSINE_FLOOR: GucSetting<f64> = GucSetting::<f64>::new(DEFAULT_COSINE_FLOOR);
static TIE_MARGIN: GucSetting<f64> = GucSetting::<f64>::new(0.02);
static DUP_THRESHOLD: GucSetting<f64> = GucSetting::<f64>::new(0.92);
static EXACT_SCAN_LIMIT: GucSetting<i32> = GucSetting::<i32>::new(5000);

/// Calibrated on the sample notes and golden questions (see README, "The relevance floor").
pub const DEFAULT_RERANK_FLOOR: f64 = -9.4;
pub const DEFAULT_COSINE_FLOOR: f64 = 0.63;
static EMBED_BATCH_SIZE: GucSetting<i32> = GucSetting::<i32>::new(64);

pub fn init() {
    GucRegistry::define_string_guc(
        c"pg_feedback.model_dir",
        c"Directory holding one folder per model (manifest.json, model.onnx, tokenizer.json).",
        c"Empty means SHAREDIR/pg_feedback/models of this Postgres installation. Superuser only: model files \
          run as native code paths inside the server.",
        &MODEL_DIR,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"pg_feedback.onnxruntime_library",
        c"Absolute path of libonnxruntime.so.",
        c"Empty means PKGLIBDIR/pg_feedback/libonnxruntime.so. Loaded once per backend at the first model use; \
          a change takes effect in new sessions. Superuser only.",
        &RUNTIME_LIBRARY,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"pg_feedback.embedding_model",
        c"Embedding model for notes and queries: the name of a folder in pg_feedback.model_dir.",
        c"It must produce 384-wide vectors. Notes record the model that embedded them; after a change, \
          re-embed stored notes so queries and notes share one vector space.",
        &EMBEDDING_MODEL,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"pg_feedback.rerank_model",
        c"Cross-encoder used by fb_rerank: the name of a folder in pg_feedback.model_dir.",
        c"",
        &RERANK_MODEL,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_feedback.intra_op_threads",
        c"Threads ONNX Runtime uses inside one model run, per backend.",
        c"Each backend that runs a model owns this many threads (one is the backend itself). \
          Keep it low when many sessions embed at once.",
        &INTRA_THREADS,
        1,
        64,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_feedback.query_cache_size",
        c"Query embeddings each backend keeps (least recently used evicted); 0 disables the cache.",
        c"Keyed by (embedding model, query text). About 1.6 kB per entry.",
        &QUERY_CACHE_SIZE,
        0,
        1_000_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pg_feedback.rerank",
        c"Whether fb_retrieve reranks candidates with the cross-encoder (when fb_retrieve's rerank argument is NULL).",
        c"Off, or with pg_feedback.rerank_model empty, fb_retrieve ranks by cosine similarity and reports \
          scored_by = 'cosine'.",
        &RERANK,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"pg_feedback.rerank_floor",
        c"Least cross-encoder score (a logit) a note needs to be returned by fb_retrieve.",
        c"Calibrated on the project's golden questions; fb_retrieve's min_score argument overrides it.",
        &RERANK_FLOOR,
        -100.0,
        100.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"pg_feedback.cosine_floor",
        c"Least cosine similarity a note needs to be returned by fb_retrieve when it ranks without the cross-encoder.",
        c"Calibrated on the project's golden questions; fb_retrieve's min_score argument overrides it.",
        &COSINE_FLOOR,
        -1.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"pg_feedback.tie_margin",
        c"Near-tie margin: a newer note ranks ahead of an older one whose relevance is at most this much higher.",
        c"Measured as cosine similarity, or as the cross-encoder's probability (sigmoid of its logit).",
        &TIE_MARGIN,
        0.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"pg_feedback.dup_threshold",
        c"Cosine similarity at which a new note is merged into an active note of the same task_type.",
        c"1 disables near-duplicate merging (identical content is always merged by its content hash).",
        &DUP_THRESHOLD,
        0.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_feedback.exact_scan_limit",
        c"Candidate search is exact when a task_type has at most this many active notes, HNSW otherwise.",
        c"Exact search has perfect recall and is fast for small sets; above the limit the HNSW index is used \
          with pgvector's iterative scans, so selective filters still return enough candidates.",
        &EXACT_SCAN_LIMIT,
        0,
        i32::MAX,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_feedback.embed_batch_size",
        c"Most texts per embedding model run (bulk inserts, fb_embed_batch).",
        c"Larger batches amortise per-run overhead; texts are grouped by length so little is padded.",
        &EMBED_BATCH_SIZE,
        1,
        1024,
        GucContext::Userset,
        GucFlags::default(),
    );
}

fn string(setting: &GucSetting<Option<CString>>) -> Option<String> {
    setting.get().map(|s| s.to_string_lossy().trim().to_string()).filter(|s| !s.is_empty())
}

/// The configured embedding model's name (may be invalid: the host checks it).
pub fn embedding_model() -> String {
    string(&EMBEDDING_MODEL).unwrap_or_default()
}

pub fn rerank_model() -> String {
    string(&RERANK_MODEL).unwrap_or_default()
}

pub fn tie_margin() -> f64 {
    TIE_MARGIN.get()
}

pub fn query_cache_size() -> usize {
    QUERY_CACHE_SIZE.get() as usize
}

pub fn host_config() -> HostConfig {
    HostConfig {
        runtime_library: string(&RUNTIME_LIBRARY)
            .map(PathBuf::from)
            .unwrap_or_else(|| pkglib_dir().join("pg_feedback").join("libonnxruntime.so")),
        model_dir: string(&MODEL_DIR)
            .map(PathBuf::from)
            .unwrap_or_else(|| share_dir().join("pg_feedback").join("models")),
        intra_threads: INTRA_THREADS.get() as usize,
        dimensions: DIMENSIONS,
        batch_size: EMBED_BATCH_SIZE.get() as usize,
    }
}

fn share_dir() -> PathBuf {
    let mut buf = [0 as c_char; pg_sys::MAXPGPATH as usize];
    // SAFETY: my_exec_path is set for every backend; get_share_path writes at most MAXPGPATH bytes.
    unsafe {
        pg_sys::get_share_path(std::ptr::addr_of!(pg_sys::my_exec_path).cast(), buf.as_mut_ptr());
        PathBuf::from(CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned())
    }
}

fn pkglib_dir() -> PathBuf {
    // SAFETY: pkglib_path is a NUL-terminated MAXPGPATH buffer set at backend start.
    unsafe {
        let p = std::ptr::addr_of!(pg_sys::pkglib_path).cast::<c_char>();
        PathBuf::from(CStr::from_ptr(p).to_string_lossy().into_owned())
    }
}

//! Every `pg_feedback.*` setting, in one place, with typed accessors.

use std::ffi::{c_char, CStr, CString};
use std::path::PathBuf;
use std::time::Duration;

use feedback_core::model::HostConfig;
use pgrx::{pg_sys, GucContext, GucFlags, GucRegistry, GucSetting, PostgresGucEnum};

/// `pg_feedback.review`: which new notes wait for a reviewer.
#[derive(PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum Review {
    /// Notes with screening findings.
    #[name = c"flagged"]
    Flagged,
    /// Every new note.
    #[name = c"all"]
    All,
    /// None (findings are still recorded).
    #[name = c"off"]
    Off,
}

/// `pg_feedback.revisions`: what happens when a new note revises (reverses or changes) an active one.
#[derive(PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum Revisions {
    /// The newer note waits for a reviewer (pending, "revises #id"); the older stays live until it is approved.
    #[name = c"review"]
    Review,
    /// The newer note goes live at once and supersedes the older.
    #[name = c"newest"]
    Newest,
    /// Both stay live; fb_retrieve still never injects both (the newer wins).
    #[name = c"keep_both"]
    KeepBoth,
}

impl Review {
    pub fn as_str(self) -> &'static str {
        match self {
            Review::Flagged => "flagged",
            Review::All => "all",
            Review::Off => "off",
        }
    }
}

/// `pg_feedback.inference`: where models run.
#[derive(PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum Inference {
    /// The shared worker when the library is preloaded, else in the backend.
    #[name = c"auto"]
    Auto,
    /// The shared worker (an ERROR if the library is not preloaded).
    #[name = c"worker"]
    Worker,
    /// In each backend.
    #[name = c"backend"]
    Backend,
}

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
static TIE_MARGIN: GucSetting<f64> = GucSetting::<f64>::new(0.0);
static DUP_THRESHOLD: GucSetting<f64> = GucSetting::<f64>::new(0.92);
static COMPARE_THRESHOLD: GucSetting<f64> = GucSetting::<f64>::new(0.75);
static EXACT_SCAN_LIMIT: GucSetting<i32> = GucSetting::<i32>::new(20000);

/// fb_calibrate() on the tune split of the project's golden questions (see README, "Calibration").
pub const DEFAULT_RERANK_FLOOR: f64 = -5.75;
pub const DEFAULT_COSINE_FLOOR: f64 = 0.64;
static EMBED_BATCH_SIZE: GucSetting<i32> = GucSetting::<i32>::new(64);
static MAX_BATCH_TOKENS: GucSetting<i32> = GucSetting::<i32>::new(1024);
static MAX_INPUT_BYTES: GucSetting<i32> = GucSetting::<i32>::new(65536);
static MAX_CALL_BYTES: GucSetting<i32> = GucSetting::<i32>::new(4 * 1024 * 1024);
static REVIEW: GucSetting<Review> = GucSetting::<Review>::new(Review::Flagged);
static REVISIONS: GucSetting<Revisions> = GucSetting::<Revisions>::new(Revisions::Review);
static RESTORE_MODE: GucSetting<bool> = GucSetting::<bool>::new(false);
static INFERENCE: GucSetting<Inference> = GucSetting::<Inference>::new(Inference::Auto);
static WORKER_RUNNERS: GucSetting<i32> = GucSetting::<i32>::new(0);
static WORKER_THREADS: GucSetting<i32> = GucSetting::<i32>::new(1);
static WORKER_IDLE_THREADS: GucSetting<i32> = GucSetting::<i32>::new(0);
static BATCH_MERGE: GucSetting<bool> = GucSetting::<bool>::new(false);
static BATCH_WAIT: GucSetting<i32> = GucSetting::<i32>::new(1);
static WORKER_TIMEOUT: GucSetting<i32> = GucSetting::<i32>::new(60_000);
static RELATIVE_CUT: GucSetting<f64> = GucSetting::<f64>::new(0.5);
static COSINE_RELATIVE_CUT: GucSetting<f64> = GucSetting::<f64>::new(0.01);
static MAX_NOTES: GucSetting<i32> = GucSetting::<i32>::new(1);
static RERANK_TIE_MARGIN: GucSetting<f64> = GucSetting::<f64>::new(0.5);
static SELECTIVE_RERANK: GucSetting<bool> = GucSetting::<bool>::new(true);
static RERANK_MAX_PAIRS: GucSetting<i32> = GucSetting::<i32>::new(3);
static RERANK_MIN_COSINE: GucSetting<f64> = GucSetting::<f64>::new(-1.0);
static RERANK_COSINE_GAP: GucSetting<f64> = GucSetting::<f64>::new(0.08);
static RERANK_STAGE: GucSetting<i32> = GucSetting::<i32>::new(2);
static RERANK_DECIDED: GucSetting<f64> = GucSetting::<f64>::new(-2.0);
static RERANK_DECIDED_GAP: GucSetting<f64> = GucSetting::<f64>::new(0.01);
static RERANK_MAX_TOKENS: GucSetting<i32> = GucSetting::<i32>::new(96);
static RERANK_CACHE_SIZE: GucSetting<i32> = GucSetting::<i32>::new(10_000);
static HYBRID: GucSetting<bool> = GucSetting::<bool>::new(true);
static HYBRID_CANDIDATES: GucSetting<i32> = GucSetting::<i32>::new(20);
static RRF_K: GucSetting<i32> = GucSetting::<i32>::new(60);
static LEXICAL_RANK_LIMIT: GucSetting<i32> = GucSetting::<i32>::new(2000);
static SLICE_INDEX_MIN: GucSetting<i32> = GucSetting::<i32>::new(5000);
static LOG_RETRIEVALS: GucSetting<bool> = GucSetting::<bool>::new(false);

pub fn init() {
    init_worker();
    init_retrieval();
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
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"pg_feedback.rerank_model",
        c"Cross-encoder used by fb_rerank: the name of a folder in pg_feedback.model_dir.",
        c"",
        &RERANK_MODEL,
        GucContext::Suset,
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
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_feedback.query_cache_size",
        c"Query embeddings each backend keeps (least recently used evicted); 0 disables the cache.",
        c"Keyed by (embedding model, query text). About 1.6 kB per entry.",
        &QUERY_CACHE_SIZE,
        0,
        1_000_000,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"pg_feedback.dup_threshold",
        c"1 turns near-duplicate merging and revisions off; before 0.8.0, the cosine at which notes merged.",
        c"From 0.8.0 notes are compared by text (pg_feedback.compare_threshold); the value is kept for \
          installations still on an older extension version, whose SQL merges at this cosine. Identical \
          content is always merged by its content hash.",
        &DUP_THRESHOLD,
        0.0,
        1.0,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"pg_feedback.compare_threshold",
        c"Cosine similarity at which an active note of the same task_type and tenant is compared with a new note.",
        c"The nearest neighbours at or above it (and above the comparison model's own bound) are compared by \
          their text (fb_compare_notes): a rewording is merged, a revision supersedes (pg_feedback.revisions), \
          anything else stays. pg_feedback.dup_threshold = 1 turns merging and revisions off.",
        &COMPARE_THRESHOLD,
        0.0,
        1.0,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_feedback.embed_batch_size",
        c"Most texts (or reranked pairs) per model run (bulk inserts, fb_embed_batch, fb_rerank).",
        c"A call is split into chunks of this many texts (one request each to the inference worker); a chunk's \
          texts are grouped by token count into runs, also bounded by pg_feedback.max_batch_tokens.",
        &EMBED_BATCH_SIZE,
        1,
        1024,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_feedback.max_batch_tokens",
        c"Most padded tokens (texts x longest text) in one model run, for embedding and reranking.",
        c"Bounds a backend's memory whatever the texts' length: a run of long texts holds fewer of them. \
          Superuser only.",
        &MAX_BATCH_TOKENS,
        512,
        1_048_576,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_feedback.max_input_bytes",
        c"Largest text, in bytes, that any pg_feedback function embeds, reranks, screens or counts.",
        c"Longer inputs are refused with an ERROR before they are tokenized (notes: each of lesson, \
          correction and wrong_answer). Superuser only.",
        &MAX_INPUT_BYTES,
        1024,
        64 * 1024 * 1024,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_feedback.max_call_bytes",
        c"Largest total, in bytes, of the texts one call of a pg_feedback function embeds, reranks or counts.",
        c"Checked with pg_feedback.max_input_bytes before any tokenizer runs: fb_embed_batch's texts, fb_rerank's \
          (query, passage) pairs (the query counted once per pair), fb_build_prompt's lessons and corrections. \
          Bounds the model work one call can ask of the shared inference worker. Superusers are not held to it, so \
          the insert trigger and fb_reembed (which run as the extension's owner) embed a statement's rows in \
          chunks bounded per model run by pg_feedback.max_batch_tokens. Superuser only.",
        &MAX_CALL_BYTES,
        1024,
        1024 * 1024 * 1024,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_enum_guc(
        c"pg_feedback.review",
        c"Which new notes wait for a reviewer (status pending) before they can be retrieved: flagged, all or off.",
        c"flagged: notes whose lesson or correction fb_screen flags; all: every new note; off: none (screening \
          findings are still recorded). Superuser only.",
        &REVIEW,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_enum_guc(
        c"pg_feedback.revisions",
        c"What happens when a new note revises an active one: review, newest or keep_both.",
        c"review: the newer note waits in feedback_review_queue (revises #id) and supersedes the older when a \
          reviewer approves it; newest: it goes live and supersedes the older at once; keep_both: both stay \
          live (fb_retrieve injects only the newer). Superuser only.",
        &REVISIONS,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pg_feedback.restore_mode",
        c"Trust the stored fields of inserted rows (a restore of a dump): keep their id, embedding, status, \
          timestamps and counts, and skip redaction, screening and near-duplicate merging.",
        c"Honoured only for superusers and members of feedback_reviewer; for anyone else inserts are \
          treated as new notes whatever this says.",
        &RESTORE_MODE,
        GucContext::Userset,
        GucFlags::default(),
    );
}

/// One setting of how fb_retrieve searches, cuts, reranks and fuses: its name and descriptions, its value with
/// its bounds, and the keys it fills in the settings value `_fb_settings` returns (the columns of
/// `feedback_retrieval_settings` it is the default of; none for settings only the database reads). Every one is
/// user-settable.
struct Retrieval {
    name: &'static CStr,
    short: &'static CStr,
    long: &'static CStr,
    value: Value,
    keys: &'static [&'static str],
}

enum Value {
    Float(&'static GucSetting<f64>, f64, f64),
    Int(&'static GucSetting<i32>, i32, i32),
    Bool(&'static GucSetting<bool>),
}

const PRECEDENCE: &CStr = c"Rows of feedback_retrieval_settings (written by fb_calibrate) take precedence.";

/// The retrieval settings. Defaults come from fb_calibrate on the tune split of the project's golden questions
/// (README, "Calibration").
static RETRIEVAL: &[Retrieval] = &[
    Retrieval {
        name: c"pg_feedback.rerank",
        short: c"Whether fb_retrieve reranks candidates with the cross-encoder (when fb_retrieve's rerank argument is NULL).",
        long: c"Off, or with pg_feedback.rerank_model empty, fb_retrieve ranks by cosine similarity and reports \
              scored_by = 'cosine'.",
        value: Value::Bool(&RERANK),
        keys: &["rerank_enabled"],
    },
    Retrieval {
        name: c"pg_feedback.rerank_floor",
        short: c"Least cross-encoder score (a logit) a note needs to be returned by fb_retrieve.",
        long: c"Calibrated on the project's golden questions; fb_retrieve's min_score argument overrides it.",
        value: Value::Float(&RERANK_FLOOR, -100.0, 100.0),
        keys: &["rerank_floor"],
    },
    Retrieval {
        name: c"pg_feedback.relative_cut",
        short: c"Relative cut on cross-encoder scores: fb_retrieve drops notes scoring more than this many logits below \
              the best candidate; -1: no relative cut.",
        long: PRECEDENCE,
        value: Value::Float(&RELATIVE_CUT, -1.0, 1000.0),
        keys: &["relative_cut"],
    },
    Retrieval {
        name: c"pg_feedback.max_notes",
        short: c"Most notes fb_retrieve returns when final_k is not given (fb_build_prompt, fb_eval).",
        long: c"Calibrated: every extra note is one more chance to inject an irrelevant one. Rows of \
              feedback_retrieval_settings take precedence (max_notes, cosine_max_notes).",
        value: Value::Int(&MAX_NOTES, 1, 1000),
        keys: &["max_notes", "cosine_max_notes"],
    },
    Retrieval {
        name: c"pg_feedback.rerank_tie_margin",
        short: c"Near-tie margin on cross-encoder logits: between two notes that both pass the floor and score within \
              this of each other, the newer ranks first.",
        long: PRECEDENCE,
        value: Value::Float(&RERANK_TIE_MARGIN, 0.0, 100.0),
        keys: &["rerank_tie_margin"],
    },
    Retrieval {
        name: c"pg_feedback.cosine_floor",
        short: c"Least cosine similarity a note needs to be returned by fb_retrieve when it ranks without the cross-encoder.",
        long: c"Calibrated on the project's golden questions; fb_retrieve's min_score argument overrides it.",
        value: Value::Float(&COSINE_FLOOR, -1.0, 1.0),
        keys: &["cosine_floor"],
    },
    Retrieval {
        name: c"pg_feedback.cosine_relative_cut",
        short: c"Relative cut when ranking by cosine: notes more than this below the best candidate's similarity are \
              dropped; -1: none.",
        long: PRECEDENCE,
        value: Value::Float(&COSINE_RELATIVE_CUT, -1.0, 2.0),
        keys: &["cosine_relative_cut"],
    },
    Retrieval {
        name: c"pg_feedback.tie_margin",
        short: c"Near-tie margin when ranking by cosine: a newer note ranks ahead of an older one whose cosine \
              similarity is at most this much higher.",
        long: c"Only between notes that both pass the floor. The cross-encoder's margin is \
              pg_feedback.rerank_tie_margin. Rows of feedback_retrieval_settings take precedence.",
        value: Value::Float(&TIE_MARGIN, 0.0, 1.0),
        keys: &["cosine_tie_margin"],
    },
    Retrieval {
        name: c"pg_feedback.selective_rerank",
        short: c"Whether the cross-encoder scores only the candidates the first stage cannot settle (off: all of them).",
        long: c"Bounded by pg_feedback.rerank_max_pairs, rerank_min_cosine, rerank_cosine_gap, rerank_stage, \
              rerank_decided and rerank_decided_gap (or their feedback_retrieval_settings columns).",
        value: Value::Bool(&SELECTIVE_RERANK),
        keys: &["selective"],
    },
    Retrieval {
        name: c"pg_feedback.rerank_max_pairs",
        short: c"Most candidates the cross-encoder scores per query (selective reranking).",
        long: PRECEDENCE,
        value: Value::Int(&RERANK_MAX_PAIRS, 1, 1000),
        keys: &["rerank_max_pairs"],
    },
    Retrieval {
        name: c"pg_feedback.rerank_min_cosine",
        short: c"Candidates below this cosine similarity are never reranked (nor returned) when reranking selectively.",
        long: c"An absolute bound, so it holds for one embedding model only: fb_calibrate may set it in a row tagged \
              with its model. -1 (the default): no bound.",
        value: Value::Float(&RERANK_MIN_COSINE, -1.0, 1.0),
        keys: &["rerank_min_cosine"],
    },
    Retrieval {
        name: c"pg_feedback.rerank_cosine_gap",
        short: c"Candidates more than this below the best candidate's cosine similarity are never reranked.",
        long: c"2: no bound.",
        value: Value::Float(&RERANK_COSINE_GAP, 0.0, 2.0),
        keys: &["rerank_cosine_gap"],
    },
    Retrieval {
        name: c"pg_feedback.rerank_stage",
        short: c"Candidates the cross-encoder scores per stage of selective reranking.",
        long: c"After each stage the early exit (pg_feedback.rerank_decided) is checked.",
        value: Value::Int(&RERANK_STAGE, 1, 1000),
        keys: &["rerank_stage"],
    },
    Retrieval {
        name: c"pg_feedback.rerank_decided",
        short: c"Early exit: once a candidate scores at least this logit, later stages rerank only candidates within \
              pg_feedback.rerank_decided_gap of the best cosine similarity.",
        long: c"100: never.",
        value: Value::Float(&RERANK_DECIDED, -100.0, 100.0),
        keys: &["rerank_decided"],
    },
    Retrieval {
        name: c"pg_feedback.rerank_decided_gap",
        short: c"After the early exit, how close (in cosine similarity) to the best candidate a candidate must be to \
              still be reranked.",
        long: PRECEDENCE,
        value: Value::Float(&RERANK_DECIDED_GAP, 0.0, 2.0),
        keys: &["rerank_decided_gap"],
    },
    Retrieval {
        name: c"pg_feedback.rerank_max_tokens",
        short: c"Most tokens of a (query, lesson + correction) pair the cross-encoder reads; the passage is cut first. \
              0: the model's own limit (512).",
        long: c"Reranking cost grows with pair length (about 0.25 ms per token on one core). 96 is the shortest limit \
              that changed no answer on the tune split of the project's golden questions.",
        value: Value::Int(&RERANK_MAX_TOKENS, 0, 512),
        keys: &[],
    },
    Retrieval {
        name: c"pg_feedback.rerank_cache_size",
        short: c"Cross-encoder scores each backend keeps, keyed by (model, pair length limit, query, passage); 0: none.",
        long: c"Recurring questions then cost no model run for passages already scored. An entry holds its query and \
              passage: a few hundred bytes for ordinary notes.",
        value: Value::Int(&RERANK_CACHE_SIZE, 0, 1_000_000),
        keys: &[],
    },
    Retrieval {
        name: c"pg_feedback.exact_scan_limit",
        short: c"Candidate search is exact when a task_type has at most this many active notes, HNSW otherwise.",
        long: c"Exact search has perfect recall and is fast for small sets; above the limit the HNSW index is used \
              with pgvector's iterative scans, so selective filters still return enough candidates.",
        value: Value::Int(&EXACT_SCAN_LIMIT, 0, i32::MAX),
        keys: &[],
    },
    Retrieval {
        name: c"pg_feedback.slice_index_min",
        short: c"Active notes from which fb_maintain gives a task_type its own partial HNSW index (dropped below half).",
        long: c"A task_type with a slice index is searched through it whatever its size: complete candidates (recall \
              0.96-0.99 at 1M notes against 0.40-0.48 through the global index) in a few milliseconds.",
        value: Value::Int(&SLICE_INDEX_MIN, 1, i32::MAX),
        keys: &[],
    },
    Retrieval {
        name: c"pg_feedback.hybrid",
        short: c"Whether fb_retrieve adds full-text candidates (lesson + correction) to the dense ones, fused by \
              reciprocal rank.",
        long: c"Helps exact identifiers (function names, error codes) that embeddings blur.",
        value: Value::Bool(&HYBRID),
        keys: &[],
    },
    Retrieval {
        name: c"pg_feedback.hybrid_candidates",
        short: c"Full-text candidates fetched per query when pg_feedback.hybrid is on.",
        long: c"",
        value: Value::Int(&HYBRID_CANDIDATES, 1, 1000),
        keys: &[],
    },
    Retrieval {
        name: c"pg_feedback.lexical_rank_limit",
        short: c"Most full-text matches fb_retrieve ranks per query when pg_feedback.hybrid is on.",
        long: c"The question's rarest terms are kept while the notes of the task_type they are estimated to match \
              (planner statistics) stay within the limit; matches beyond it are not ranked. Bounds the hybrid stage \
              for large task_types; a small store never reaches it.",
        value: Value::Int(&LEXICAL_RANK_LIMIT, 1, i32::MAX),
        keys: &[],
    },
    Retrieval {
        name: c"pg_feedback.rrf_k",
        short: c"Reciprocal-rank fusion constant: a candidate's fused score is the sum of 1 / (rrf_k + rank) over the \
              dense and full-text lists.",
        long: c"Larger values flatten the difference between top ranks.",
        value: Value::Int(&RRF_K, 1, 1000),
        keys: &[],
    },
    Retrieval {
        name: c"pg_feedback.log_retrievals",
        short: c"Whether fb_retrieve records each retrieval in feedback_retrievals (query redacted, task_type, \
              returned notes and scores, models, time), for fb_judge.",
        long: c"Never on a hot standby or in a read-only transaction (the retrieval then returns no retrieval_id).",
        value: Value::Bool(&LOG_RETRIEVALS),
        keys: &[],
    },
];

fn init_retrieval() {
    for r in RETRIEVAL {
        let (ctx, flags) = (GucContext::Userset, GucFlags::default());
        match r.value {
            Value::Float(s, min, max) => {
                GucRegistry::define_float_guc(r.name, r.short, r.long, s, min, max, ctx, flags)
            }
            Value::Int(s, min, max) => GucRegistry::define_int_guc(r.name, r.short, r.long, s, min, max, ctx, flags),
            Value::Bool(s) => GucRegistry::define_bool_guc(r.name, r.short, r.long, s, ctx, flags),
        }
    }
}

/// The retrieval settings' current values under their keys (see [`Retrieval`]): the base `_fb_settings` merges
/// the calibrated rows over.
pub fn retrieval_settings() -> serde_json::Map<String, serde_json::Value> {
    let mut out = serde_json::Map::new();
    for r in RETRIEVAL {
        let value = match r.value {
            Value::Float(s, ..) => serde_json::json!(s.get()),
            Value::Int(s, ..) => serde_json::json!(s.get()),
            Value::Bool(s) => serde_json::json!(s.get()),
        };
        for key in r.keys {
            out.insert(key.to_string(), value.clone());
        }
    }
    out
}

/// The shared inference worker's settings.
fn init_worker() {
    GucRegistry::define_enum_guc(
        c"pg_feedback.inference",
        c"Where models run: auto (the shared worker when pg_feedback is in shared_preload_libraries, else in \
          each backend), worker, or backend.",
        c"The worker holds one copy of the models for the whole cluster; in backend mode every connection that \
          embeds or reranks loads its own (about 140 MB and a model load per connection). Superuser only.",
        &INFERENCE,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_feedback.worker_runners",
        c"Model runs the shared inference worker makes at once; 0 means one per CPU.",
        c"Each runner is a thread with its own copy of the model sessions (about 150 MB with both models): a \
          request runs on one runner, as it would in its backend, while others run beside it. Read when the \
          worker starts (after a reload: SELECT pg_terminate_backend(pid) FROM feedback_worker restarts it).",
        &WORKER_RUNNERS,
        0,
        64,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_feedback.worker_threads",
        c"ONNX Runtime intra-op threads of each of the inference worker's runners.",
        c"1 by default: the runners already use the cores. Takes effect at the next model load after a reload.",
        &WORKER_THREADS,
        1,
        64,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_feedback.worker_idle_threads",
        c"ONNX Runtime intra-op threads of an embedding run the inference worker makes while its other runners \
          are idle and no request waits; 0 means one per CPU, at most 4.",
        c"A lone request (one reviewer's retrieval) then uses the cores the idle runners would: a 25-line input \
          embeds about 1.8 times faster on 2 cores, with the same vectors bit for bit. A request that arrives \
          meanwhile runs on a free runner with worker_threads. At most worker_threads turns it off, as does a \
          single runner. Each runner keeps a second embedding session for it (about 50 MB). Takes effect after a \
          reload.",
        &WORKER_IDLE_THREADS,
        0,
        64,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pg_feedback.batch_merge",
        c"Whether the inference worker puts requests of different sessions into the same model runs.",
        c"Off by default: the int8 models quantize activations with one scale per run, so a text's vector (or a \
          pair's score) would depend on what other sessions sent at the same moment (cosine about 0.997, up to \
          a logit), and merging measured little faster on CPU. Requests are still gathered per wake-up.",
        &BATCH_MERGE,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_feedback.batch_wait",
        c"How long the inference worker waits for more requests before a merged model run (batch_merge on).",
        c"Bounded: at most 100 ms. 0 runs what is queued at once.",
        &BATCH_WAIT,
        0,
        100,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"pg_feedback.worker_timeout",
        c"How long a backend waits for the inference worker to take its request before it gives up with an ERROR.",
        c"Covers a worker that is restarting or overloaded; a request the worker has taken is waited for as long \
          as the worker lives (statement_timeout and cancellation still apply).",
        &WORKER_TIMEOUT,
        100,
        3_600_000,
        GucContext::Userset,
        GucFlags::UNIT_MS,
    );
}

pub fn inference() -> Inference {
    INFERENCE.get()
}

/// The worker's runner threads (0: the number of CPUs).
pub fn worker_runners() -> usize {
    match WORKER_RUNNERS.get() {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n as usize,
    }
}

/// Intra-op threads per runner.
pub fn worker_threads() -> usize {
    WORKER_THREADS.get().max(1) as usize
}

/// Intra-op threads of an embedding run made while the worker's other runners are idle (never fewer than
/// [`worker_threads`]).
pub fn worker_idle_threads() -> usize {
    let n = match WORKER_IDLE_THREADS.get() {
        // One per CPU, at most 4: each runner keeps a session with this many threads, and short runs gain little
        // from more.
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()).min(4),
        n => n as usize,
    };
    n.max(worker_threads())
}

pub fn batch_merge() -> bool {
    BATCH_MERGE.get()
}

pub fn batch_wait() -> Duration {
    Duration::from_millis(BATCH_WAIT.get() as u64)
}

pub fn worker_timeout() -> Duration {
    Duration::from_millis(WORKER_TIMEOUT.get() as u64)
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

/// `pg_feedback.rerank_max_tokens` (0: the cross-encoder's own limit).
pub fn rerank_max_tokens() -> usize {
    RERANK_MAX_TOKENS.get().max(0) as usize
}

pub fn rerank_cache_size() -> usize {
    RERANK_CACHE_SIZE.get().max(0) as usize
}

pub fn review() -> Review {
    REVIEW.get()
}

pub fn restore_mode() -> bool {
    RESTORE_MODE.get()
}

pub fn max_input_bytes() -> usize {
    MAX_INPUT_BYTES.get() as usize
}

pub fn max_call_bytes() -> usize {
    MAX_CALL_BYTES.get() as usize
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
        max_batch_tokens: MAX_BATCH_TOKENS.get() as usize,
        max_pair_tokens: rerank_max_tokens(),
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

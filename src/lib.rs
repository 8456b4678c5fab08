//! pg_feedback: reviewer corrections stored as notes, embedded in the database, fed back into prompts.
//!
//! This crate is the Postgres shell. Models, pooling and note identity live in `feedback_core`.

use pgrx::prelude::*;

mod compat;
mod decide;
mod dedup;
mod embed;
mod error;
mod eval;
mod guard;
mod gucs;
mod host;
mod notes;
mod prompt;
mod rerank;
mod retrieve;
mod worker;

::pgrx::pg_module_magic!(name, version);

// The SQL API, after the Rust functions it wraps, in dependency order.
extension_sql_file!("../sql/actors.sql", name = "actors", requires = [notes::_fb_restore_mode]);
extension_sql_file!(
    "../sql/models.sql",
    name = "models",
    requires = [
        "actors",
        embed::_fb_embed_with,
        embed::_fb_model_key,
        embed::_fb_default_model,
        embed::_fb_installed_models,
        embed::fb_count_tokens,
        embed::fb_model_stats,
        notes::fb_content_hash,
        notes::fb_document_text,
        notes::_fb_normalize,
        rerank::fb_rerank,
    ]
);
extension_sql_file!(
    "../sql/notes.sql",
    name = "notes",
    requires = [
        "models",
        notes::_fb_clean_note,
        notes::_fb_review_mode,
        notes::_fb_task_type,
        notes::conflict::_fb_on_conflict_do_nothing,
        guard::fb_screen,
        guard::fb_redact,
        guard::_fb_clean_field,
    ]
);
extension_sql_file!("../sql/search.sql", name = "search", requires = ["notes"]);
extension_sql_file!(
    "../sql/dedup.sql",
    name = "dedup",
    requires = [
        "search",
        dedup::_fb_dedup_neighbour,
        dedup::_fb_residuals,
        dedup::_fb_needs_residuals,
        dedup::_fb_compare_texts,
    ]
);
extension_sql_file!("../sql/review.sql", name = "review", requires = ["dedup"]);
extension_sql_file!(
    "../sql/retrieve.sql",
    name = "retrieve",
    requires = [
        "dedup",
        embed::fb_rerank_model,
        retrieve::_fb_rank_notes,
        retrieve::_fb_retrieval_gucs,
        rerank::_fb_rerank_selective,
        prompt::_fb_build_prompt,
        decide::_fb_input_kind,
        decide::_fb_segments_for,
        decide::_fb_shipped_decision,
        decide::_fb_decide_for
    ]
);
extension_sql_file!(
    "../sql/eval.sql",
    name = "eval",
    requires = ["retrieve", eval::_fb_question_metrics, eval::_fb_calibrate_sweep, decide::_fb_fit_decision]
);
extension_sql_file!("../sql/reembed.sql", name = "reembed", requires = ["eval", "review"]);
extension_sql_file!("../sql/worker.sql", name = "worker", requires = ["models", worker::_fb_worker_status]);
// Roles and privileges, once every object exists.
extension_sql_file!("../sql/security.sql", name = "security", finalize);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    gucs::init();
    worker::init();
}

#[cfg(any(test, feature = "pg_test"))]
mod tests;

/// Used by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![]
    }
}

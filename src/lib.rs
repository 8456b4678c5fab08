//! pg_feedback: reviewer corrections stored as notes, embedded in the database, fed back into prompts.
//!
//! This crate is the Postgres shell. Models, pooling and note identity live in `feedback_core`.

use pgrx::prelude::*;

mod embed;
mod error;
mod guard;
mod gucs;
mod host;
mod notes;
mod prompt;
mod rerank;
mod retrieve;

::pgrx::pg_module_magic!(name, version);

// The SQL API, after the Rust functions it wraps; retrieve.sql builds on notes.sql.
extension_sql_file!(
    "../sql/notes.sql",
    name = "notes",
    requires = [
        embed::_fb_embed,
        embed::_fb_embed_batch,
        embed::fb_embedding_model,
        embed::fb_count_tokens,
        embed::fb_models,
        embed::fb_model_stats,
        notes::fb_note_id,
        notes::fb_document_text,
        notes::_fb_clean_note,
        notes::_fb_review_mode,
        notes::_fb_restore_mode,
        notes::_fb_task_type,
        guard::fb_screen,
        guard::fb_redact,
        rerank::fb_rerank,
    ]
);
extension_sql_file!("../sql/review.sql", name = "review", requires = ["notes"]);
extension_sql_file!(
    "../sql/retrieve.sql",
    name = "retrieve",
    requires = ["notes", embed::fb_rerank_model, retrieve::_fb_rank, prompt::_fb_build_prompt]
);
extension_sql_file!("../sql/eval.sql", name = "eval", requires = ["retrieve"]);
// Roles and privileges, once every object exists.
extension_sql_file!("../sql/security.sql", name = "security", finalize);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    gucs::init();
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

//! pg_feedback: reviewer corrections stored as notes, embedded in the database, fed back into prompts.
//!
//! This crate is the Postgres shell. Models, pooling and note identity live in `feedback_core`.

use pgrx::prelude::*;

mod embed;
mod error;
mod gucs;
mod host;
mod notes;
mod rerank;

::pgrx::pg_module_magic!(name, version);

extension_sql_file!("../sql/notes.sql", name = "notes", finalize);

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

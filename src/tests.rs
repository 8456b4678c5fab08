//! `#[pg_test]`s: SQL behaviour inside a real Postgres 18 with pgvector and the real models.
use pgrx::prelude::*;

#[pg_test]
fn embed_is_unit_norm_and_384_wide() {
    let dims =
        Spi::get_one::<i32>("SELECT vector_dims(fb_embed('The query is parameterized'))").unwrap();
    assert_eq!(dims, Some(384));
}

//! `#[pg_test]`s: SQL behaviour inside a real Postgres 18 with pgvector and the real models.
use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    fn one<T: IntoDatum + FromDatum>(sql: &str) -> T {
        Spi::get_one::<T>(sql).unwrap_or_else(|e| panic!("{sql}: {e}")).unwrap_or_else(|| panic!("{sql}: NULL"))
    }

    fn run(sql: &str) {
        Spi::run(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    #[pg_test]
    fn embed_is_unit_norm_384_wide_and_strict() {
        assert_eq!(one::<i32>("SELECT vector_dims(fb_embed('The query is parameterized'))"), 384);
        let norm = one::<f64>("SELECT vector_norm(fb_embed_query('is this query injectable?'))");
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
        assert!(one::<bool>("SELECT fb_embed(NULL) IS NULL AND fb_embed_query(NULL) IS NULL"));
    }

    #[pg_test]
    fn similar_meanings_are_closer() {
        assert!(one::<bool>(
            "SELECT fb_embed('The query is parameterized') <=> fb_embed('this uses a bound placeholder')
                  < fb_embed('The query is parameterized') <=> fb_embed('delete the user account')"
        ));
    }

    #[pg_test]
    fn query_embedding_applies_the_prefix() {
        let d = one::<f64>("SELECT fb_embed('sql injection') <=> fb_embed_query('sql injection')");
        assert!(d > 1e-4 && d < 0.5, "{d}");
    }

    #[pg_test]
    fn batch_keeps_order_and_nulls_and_matches_single() {
        assert_eq!(one::<i32>("SELECT cardinality(fb_embed_batch(ARRAY['a', NULL, 'b']))"), 3);
        assert!(one::<bool>("SELECT (fb_embed_batch(ARRAY['a', NULL, 'b']))[2] IS NULL"));
        // Alone in its batch, a text gets exactly its single-call vector.
        let d = one::<f64>(
            "SELECT (fb_embed_batch(ARRAY['use bound parameters']))[1] <=> fb_embed('use bound parameters')",
        );
        assert!(d < 1e-6, "{d}");
        // In a batch (int8 activations are quantized per batch) it stays within 0.01 cosine distance.
        let d = one::<f64>(
            "SELECT (fb_embed_batch(ARRAY['x', 'use bound parameters', 'a much longer sentence about timeouts']))[2]
                    <=> fb_embed('use bound parameters')",
        );
        assert!(d < 0.01, "{d}");
        assert_eq!(one::<i32>("SELECT coalesce(cardinality(fb_embed_batch('{}'::text[])), -1)"), 0);
    }

    #[pg_test]
    fn bulk_insert_embeds_in_batches_and_never_duplicates() {
        run("SET pg_feedback.embed_batch_size = 64");
        let runs_before = one::<i64>("SELECT embed_runs FROM fb_model_stats()");
        run("INSERT INTO feedback_notes (task_type, correction, lesson)
             SELECT 'perf_review', 'correction ' || g, 'Lesson ' || g || ': cache the prepared plan'
               FROM generate_series(1, 300) g");
        let runs = one::<i64>("SELECT embed_runs FROM fb_model_stats()") - runs_before;
        assert_eq!(runs, 5, "300 rows in runs of 64 = 5 model runs, not one per row");
        assert_eq!(one::<i64>("SELECT count(*) FROM feedback_notes"), 300);
        assert!(one::<bool>(
            "SELECT bool_and(abs(vector_norm(embedding) - 1) < 1e-4 AND vector_dims(embedding) = 384
                             AND embedding_model = 'bge-small-en-v1.5')
               FROM feedback_notes"
        ));
        run("INSERT INTO feedback_notes (task_type, correction, lesson)
             SELECT 'PERF_REVIEW ', 'correction  ' || g, ' Lesson ' || g || ':   cache the prepared plan'
               FROM generate_series(1, 300) g");
        assert_eq!(one::<i64>("SELECT count(*) FROM feedback_notes"), 300);
        assert_eq!(one::<i64>("SELECT sum(report_count) FROM feedback_notes"), 600);
    }

    #[pg_test]
    fn ingest_inserts_then_updates() {
        let first = one::<String>(
            "SELECT action FROM fb_ingest('sql_injection_scan', 'looks safe', 'Use $1 placeholders',
                                          'Concatenated SQL is injectable even when the input looks numeric.')",
        );
        assert_eq!(first, "inserted");
        let again = one::<String>(
            "SELECT action || ' ' || id FROM fb_ingest(' SQL_Injection_Scan', 'still safe?', 'Use $1  placeholders',
                                          'Concatenated SQL is injectable even when the input looks numeric.', 'import')",
        );
        let id = one::<String>(
            "SELECT fb_note_id('sql_injection_scan', 'Concatenated SQL is injectable even when the input looks numeric.',
                               'Use $1 placeholders')",
        );
        assert_eq!(again, format!("updated {id}"));
        assert_eq!(
            one::<String>("SELECT format('%s|%s|%s|%s', count(*), max(report_count), max(source), max(wrong_answer)) FROM feedback_notes"),
            "1|2|import|still safe?"
        );
    }

    #[pg_test]
    fn ingest_batch_reports_each_action_in_order() {
        run("SELECT fb_ingest('secrets_scan', '', 'Rotate the key', 'A committed key is leaked even if deleted later.')");
        let actions = one::<String>(
            "SELECT string_agg(action, ',') FROM fb_ingest_batch(ARRAY[
                ROW('secrets_scan', '', 'Rotate the key', 'A committed key is leaked even if deleted later.', NULL),
                ROW('license_check', 'MIT is fine', 'GPL-3.0 is copyleft', 'GPL code cannot ship in a closed binary.', 'import'),
                ROW('license_check', '', 'GPL-3.0 is copyleft', 'GPL code cannot ship in a closed binary.', NULL)
             ]::fb_note_input[])",
        );
        assert_eq!(actions, "updated,inserted,updated");
        assert_eq!(one::<i64>("SELECT count(*) FROM feedback_notes WHERE embedding IS NOT NULL"), 2);
    }

    #[pg_test]
    fn editing_the_lesson_rehashes_and_reembeds() {
        run("SELECT fb_ingest('null_safety_review', '', 'Check for null', 'Map.get may return null.')");
        let before = one::<String>("SELECT id || embedding::text FROM feedback_notes");
        run("UPDATE feedback_notes SET lesson = 'Map.get returns null for a missing key.'");
        let after = one::<String>("SELECT id FROM feedback_notes");
        assert_eq!(
            after,
            one::<String>(
                "SELECT fb_note_id('null_safety_review', 'Map.get returns null for a missing key.', 'Check for null')"
            )
        );
        assert_ne!(before, one::<String>("SELECT id || embedding::text FROM feedback_notes"));
        let d = one::<f64>(
            "SELECT embedding <=> fb_embed('null_safety_review: Map.get returns null for a missing key.') FROM feedback_notes",
        );
        assert!(d < 1e-6, "{d}");
    }

    #[pg_test]
    fn deprecate_is_a_soft_delete() {
        let id = one::<String>("SELECT id FROM fb_ingest('perf_review', '', 'Batch it', 'Avoid N+1 queries.')");
        assert!(one::<bool>(&format!("SELECT fb_deprecate('{id}')")));
        assert!(!one::<bool>(&format!("SELECT fb_deprecate('{id}')")));
        assert_eq!(one::<String>("SELECT status FROM feedback_notes"), "deprecated");
    }

    #[pg_test]
    fn notes_table_is_dumped_with_the_extension() {
        assert!(one::<bool>(
            "SELECT 'feedback_notes'::regclass = ANY (extconfig) FROM pg_extension WHERE extname = 'pg_feedback'"
        ));
    }

    #[pg_test]
    fn embedding_works_in_a_read_only_transaction() {
        run("SET TRANSACTION READ ONLY");
        assert_eq!(one::<i32>("SELECT vector_dims(fb_embed_query('read only'))"), 384);
    }

    #[pg_test]
    fn rerank_scores_in_input_order() {
        let s = one::<Vec<Option<f32>>>(
            "SELECT fb_rerank('is this sql injectable?', ARRAY['String-concatenated SQL is injectable.', NULL, 'The weather is nice.'])",
        );
        assert_eq!(s.len(), 3);
        assert!(s[1].is_none());
        assert!(s[0].unwrap() > s[2].unwrap() + 5.0, "{s:?}");
    }

    #[pg_test(error = "a feedback note needs a non-empty lesson")]
    fn blank_lesson_is_rejected() {
        run("SELECT fb_ingest('perf_review', '', 'something', '   ')");
    }

    #[pg_test(error = "model \"no-such-model\" is not installed")]
    fn missing_model_is_an_error_not_a_crash() {
        run("SET pg_feedback.embedding_model = 'no-such-model'");
        run("SELECT fb_embed('x')");
    }

    #[pg_test(error = "invalid model name \"../../etc\": use the name of a folder in the model directory")]
    fn model_names_cannot_leave_the_model_dir() {
        run("SET pg_feedback.embedding_model = '../../etc'");
        run("SELECT fb_embed('x')");
    }

    #[pg_test]
    fn model_settings_are_superuser_only() {
        let ctx = one::<String>(
            "SELECT string_agg(name || '=' || context, ',' ORDER BY name) FROM pg_settings
              WHERE name IN ('pg_feedback.model_dir', 'pg_feedback.onnxruntime_library')",
        );
        assert_eq!(ctx, "pg_feedback.model_dir=superuser,pg_feedback.onnxruntime_library=superuser");
    }
}

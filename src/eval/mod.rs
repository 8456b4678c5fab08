//! Evaluation and calibration in SQL (sql/eval.sql): the per-question numbers `fb_eval` averages, and the sweep
//! `fb_calibrate` runs over golden questions' scored candidates. The definitions live in `feedback_core::rank`.

use feedback_core::rank::calibrate::{calibrate, Options, Question};
use feedback_core::rank::metrics::question;
use pgrx::prelude::*;
use pgrx::JsonB;

use crate::error::FbError;

/// One golden question's numbers for the notes `returned` (best first), given its judged notes (`graded_ids`
/// with `grades`: 2 the lesson, 1 helpful, 0 not relevant); only the first `k` count.
#[pg_extern(immutable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_question_metrics(
    returned: Option<Vec<Option<i64>>>,
    graded_ids: Option<Vec<Option<i64>>>,
    grades: Option<Vec<Option<i16>>>,
    k: i32,
) -> TableIterator<
    'static,
    (
        name!(answerable, bool),
        name!(hit, bool),
        name!(reciprocal_rank, f64),
        name!(ndcg, f64),
        name!(injected, i32),
        name!(relevant, i32),
    ),
> {
    let returned: Vec<i64> = returned.unwrap_or_default().into_iter().flatten().collect();
    let ids = graded_ids.unwrap_or_default();
    let grades = grades.unwrap_or_default();
    if ids.len() != grades.len() {
        FbError::invalid_argument("graded_ids and grades differ in length", "Pass one grade per judged note.").report();
    }
    let graded: Vec<(i64, i16)> =
        ids.iter().zip(&grades).filter_map(|(id, g)| Some(((*id)?, g.unwrap_or(0)))).collect();
    let m = question(&returned, &graded, k.max(0) as usize);
    TableIterator::once((m.answerable, m.hit, m.reciprocal_rank, m.ndcg, m.injected as i32, m.relevant as i32))
}

/// The calibration sweep over `questions` (a JSON array of {group, graded: [[id, grade]...], candidates:
/// [{id, cosine, score}...]}): the chosen cuts per group and for all ('*'), the selective-reranking bounds and
/// the near-tie margins, as JSON (see `feedback_core::rank::calibrate`). No model runs; cancellable.
#[allow(clippy::too_many_arguments)]
#[pg_extern(immutable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_calibrate_sweep(
    questions: JsonB,
    lambda: f64,
    k: i32,
    per_group: bool,
    min_questions: i32,
    tolerance: f64,
    stage: i32,
) -> JsonB {
    let questions: Vec<Question> = serde_json::from_value(questions.0).unwrap_or_else(|e| {
        FbError::invalid_argument(format!("calibration input is not valid: {e}"), "Call fb_calibrate().").report()
    });
    let options = Options {
        lambda,
        k: k.max(1) as usize,
        per_group,
        min_questions: min_questions.max(1) as usize,
        tolerance,
        stage: stage.max(1) as usize,
    };
    let result = calibrate(&questions, &options, &mut || {
        check_for_interrupts!();
    });
    JsonB(serde_json::to_value(result).expect("a calibration always serializes"))
}

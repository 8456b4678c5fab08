//! The shared inference worker: one background process per cluster owns the model sessions and answers every
//! backend of every database, so a connection costs no model memory and no model load.
//!
//! - [`shared`]: the request slots and counters in shared memory (one LWLock).
//! - [`client`]: a backend's side: a request in a dynamic shared memory segment, a slot, a wait on its latch.
//! - [`server`]: the worker's loop: gather pending requests, answer them with `feedback_core`'s `serve`.
//!
//! The worker exists only when the library is in `shared_preload_libraries`; otherwise (or with
//! `pg_feedback.inference = backend`) each backend runs the models itself, as before.

pub mod client;
pub mod server;
pub mod shared;

use shared::{State, STATE};

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pgrx::bgworkers::{BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, pg_sys};

use crate::error::FbError;
use crate::gucs::{self, Inference};

/// Set in the postmaster when the library is preloaded, inherited by every backend it forks.
static PRELOADED: AtomicBool = AtomicBool::new(false);

/// Registers the shared memory and the worker. Called from `_PG_init`; does nothing unless preloading.
pub fn init() {
    // SAFETY: read in _PG_init, in the process that loads the library.
    if !unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        return;
    }
    pg_shmem_init!(STATE = State::new());
    BackgroundWorkerBuilder::new("pg_feedback inference worker")
        .set_type("pg_feedback inference")
        .set_library("pg_feedback")
        .set_function("_fb_worker_main")
        .enable_shmem_access(None)
        // Connected to no database (shared catalogs only): it shows in pg_stat_activity, pg_terminate_backend
        // reaches it, and it runs on a hot standby once it is consistent.
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::ConsistentState)
        .set_restart_time(Some(Duration::from_secs(1)))
        .load();
    PRELOADED.store(true, Ordering::Relaxed);
}

/// Whether this backend sends its model work to the worker (`pg_feedback.inference`); an ERROR when it is asked
/// to but the worker does not exist.
pub fn in_use() -> bool {
    match gucs::inference() {
        Inference::Worker if !preloaded() => FbError::invalid_argument(
            "pg_feedback.inference is \"worker\", but the inference worker is not running".to_string(),
            "Add pg_feedback to shared_preload_libraries and restart the server, or set pg_feedback.inference \
             to auto or backend.",
        )
        .report(),
        _ => selected(),
    }
}

fn preloaded() -> bool {
    PRELOADED.load(Ordering::Relaxed)
}

/// The mode `pg_feedback.inference` selects, without raising anything.
fn selected() -> bool {
    match gucs::inference() {
        Inference::Backend => false,
        Inference::Auto | Inference::Worker => preloaded(),
    }
}

/// The worker's state, one row (`feedback_worker` shows it). With the library not preloaded: mode and NULLs; for a
/// role without pg_read_all_stats: mode and configuration, NULL for the queue, counters and loaded models.
#[pg_extern(volatile, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn _fb_worker_status() -> TableIterator<
    'static,
    (
        name!(mode, String),
        name!(pid, Option<i32>),
        name!(started_at, Option<pgrx::datum::TimestampWithTimeZone>),
        name!(restarts, Option<i64>),
        name!(runners, Option<i32>),
        name!(threads, Option<i32>),
        name!(merge_requests, Option<bool>),
        name!(loaded_models, Option<Vec<String>>),
        name!(queue_depth, Option<i32>),
        name!(in_flight, Option<i32>),
        name!(batches, Option<i64>),
        name!(requests, Option<i64>),
        name!(texts, Option<i64>),
        name!(pairs, Option<i64>),
        name!(model_runs, Option<i64>),
        name!(texts_per_run, Option<f64>),
        name!(pairs_per_run, Option<f64>),
        name!(requests_per_batch, Option<f64>),
        name!(wait_ms, Option<f64>),
        name!(run_ms, Option<f64>),
        name!(errors, Option<i64>),
    ),
> {
    let mode = if selected() { "worker" } else { "backend" }.to_string();
    if !preloaded() {
        return TableIterator::once((
            mode, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None,
            None, None, None,
        ));
    }
    let s = shared::snapshot();
    // The worker serves every database: its queue, counters and models are other databases' activity too, shown
    // only to roles that may read every session's statistics (as pg_stat_activity decides).
    // SAFETY: plain catalog lookups on the current user, inside a transaction.
    let may = unsafe {
        pg_sys::has_privs_of_role(pg_sys::GetUserId(), pg_sys::Oid::from(pg_sys::ROLE_PG_READ_ALL_STATS))
    };
    let c = s.counters;
    let per = |n: u64, d: u64| (may && d > 0).then(|| n as f64 / d as f64);
    let count = |n: u64| may.then_some(n as i64);
    let started_at = (s.started_at != 0).then(|| {
        // SAFETY: a TimestampTz datum is its i64 value.
        unsafe { pgrx::datum::TimestampWithTimeZone::from_datum(pg_sys::Datum::from(s.started_at), false) }
            .expect("a timestamp")
    });
    TableIterator::once((
        mode,
        (s.pid != 0).then_some(s.pid),
        started_at,
        Some(s.starts.saturating_sub(1) as i64),
        Some(s.runners as i32),
        Some(s.threads as i32),
        Some(s.merge),
        may.then_some(s.models),
        may.then_some(s.queue_depth as i32),
        may.then_some(s.in_flight as i32),
        count(c.batches),
        count(c.requests),
        count(c.texts),
        count(c.pairs),
        count(c.embed_runs + c.rerank_runs),
        per(c.texts, c.embed_runs),
        per(c.pairs, c.rerank_runs),
        per(c.requests, c.batches),
        may.then_some(c.wait_us as f64 / 1000.0),
        may.then_some(c.run_us as f64 / 1000.0),
        count(c.errors),
    ))
}

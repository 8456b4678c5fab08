//! The worker's loop. It sleeps on its latch; backends set it when they queue a request. Each wake-up takes every
//! pending request (after `pg_feedback.batch_wait` when requests share model runs), maps their segments, answers
//! them with `feedback_core::model::remote::serve` on the worker's one `LocalHost`, writes the replies and wakes
//! the backends. Model sessions use `pg_feedback.worker_threads` intra-op threads; those threads are created with
//! every signal blocked, so Postgres' signal handlers only ever run on the main thread.

use std::time::{Duration, Instant};

use feedback_core::model::remote::{encode_reply, serve, Job, Output, Request};
use feedback_core::model::{HostConfig, LocalHost, ModelError, ModelHost, Result, TextRole};
use pgrx::bgworkers::{BackgroundWorker, SignalWakeFlags};
use pgrx::pg_sys;
use pgrx::prelude::*;

use super::client::wait;
use super::shared::{alive, wake, SlotState, STATE};
use crate::gucs;

/// One taken request: where its bytes are and what the worker made of them.
struct Taken {
    slot: usize,
    seq: u64,
    segment: *mut pg_sys::dsm_segment,
    request_len: usize,
    queued_at: i64,
    request: Result<Request>,
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn _fb_worker_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    BackgroundWorker::connect_worker_to_spi(None, None);
    let cfg = worker_config();
    {
        let mut s = STATE.exclusive();
        // SAFETY: this process's pid, latch and clock.
        unsafe {
            s.worker_pid = pg_sys::MyProcPid;
            s.worker_latch = pg_sys::MyLatch;
            s.started_at = pg_sys::GetCurrentTimestamp();
        }
        s.starts += 1;
        s.threads = cfg.intra_threads as u32;
        s.merge = gucs::batch_merge();
        // What a previous worker left: requests it took but never answered fail, abandoned ones are freed.
        for slot in s.slots.iter_mut() {
            match slot.state {
                SlotState::Running => {
                    slot.state = SlotState::Failed;
                    wake(slot.latch);
                }
                SlotState::Abandoned => slot.state = SlotState::Free,
                _ => {}
            }
        }
    }
    log!("pg_feedback inference worker started ({} intra-op threads)", cfg.intra_threads);
    let mut host = LocalHost::new();
    warm_up(&mut host, &cfg);

    loop {
        // Barriers (DROP DATABASE waits for every process to absorb one) and other interrupts.
        pg_sys::check_for_interrupts!();
        if BackgroundWorker::sigterm_received() {
            break;
        }
        if BackgroundWorker::sighup_received() {
            // SAFETY: the documented way for a background worker to re-read the configuration.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
            let mut s = STATE.exclusive();
            s.threads = worker_config().intra_threads as u32;
            s.merge = gucs::batch_merge();
        }
        if !has_pending() {
            wait(Duration::from_secs(1));
            continue;
        }
        let merge = gucs::batch_merge();
        if merge && !gucs::batch_wait().is_zero() {
            // Let requests that arrive together share the run.
            let until = Instant::now() + gucs::batch_wait();
            while let Some(left) = until.checked_duration_since(Instant::now()) {
                wait(left);
            }
        }
        run_batch(&mut host, &worker_config(), merge);
    }
    shut_down();
}

/// The worker's host settings: the session's, but with the worker's thread count.
fn worker_config() -> HostConfig {
    HostConfig { intra_threads: gucs::worker_threads(), ..gucs::host_config() }
}

/// Loads the configured models at start, so the first request of the first session does not pay for it.
fn warm_up(host: &mut LocalHost, cfg: &HostConfig) {
    let embed = gucs::embedding_model();
    let rerank = gucs::rerank_model();
    let loaded: Result<()> = with_signals_blocked(|| {
        host.embed(cfg, &embed, &["warm up"], TextRole::Query, &mut || ())?;
        if !rerank.is_empty() {
            host.rerank(cfg, &rerank, "warm up", &["warm up"], &mut || ())?;
        }
        Ok(())
    });
    if let Err(e) = loaded {
        warning!("pg_feedback inference worker: could not load the configured models at start: {e}");
    }
    STATE.exclusive().set_models(&loaded_models(host));
}

fn loaded_models(host: &LocalHost) -> Vec<String> {
    host.loaded().into_iter().map(|(kind, key)| format!("{kind}: {key}")).collect()
}

fn has_pending() -> bool {
    STATE.share().slots.iter().any(|s| s.state == SlotState::Pending)
}

/// Takes every pending request, answers them, hands the replies back.
fn run_batch(host: &mut LocalHost, cfg: &HostConfig, merge: bool) {
    // SAFETY: plain reads of this process's globals.
    let (me, now) = unsafe { (pg_sys::MyProcPid, pg_sys::GetCurrentTimestamp()) };
    let mut taken: Vec<Taken> = {
        let mut s = STATE.exclusive();
        // Replies nobody will read: their backend exited (a FATAL does not unwind to give the slot up).
        for slot in s.slots.iter_mut() {
            if matches!(slot.state, SlotState::Done | SlotState::Failed) && !alive(slot.owner_pid) {
                slot.state = SlotState::Free;
            }
        }
        s.slots
            .iter_mut()
            .enumerate()
            .filter(|(_, slot)| slot.state == SlotState::Pending)
            .map(|(i, slot)| {
                slot.state = SlotState::Running;
                slot.worker_pid = me;
                Taken {
                    slot: i,
                    seq: slot.seq,
                    segment: std::ptr::null_mut(),
                    request_len: slot.request_len as usize,
                    queued_at: slot.queued_at,
                    request: Err(ModelError::Worker { reason: "lost the request".into() }),
                }
            })
            .collect()
    };
    let handles: Vec<pg_sys::dsm_handle> = {
        let s = STATE.share();
        taken.iter().map(|t| s.slots[t.slot].handle).collect()
    };
    for (t, handle) in taken.iter_mut().zip(handles) {
        // SAFETY: NULL when the backend gave up and its segment is gone; we detach what we attach below.
        t.segment = unsafe { pg_sys::dsm_attach(handle) };
        if !t.segment.is_null() {
            // SAFETY: the backend wrote request_len bytes at the start of the segment.
            let bytes = unsafe { std::slice::from_raw_parts(segment_address(t.segment), t.request_len) };
            t.request = Request::decode(bytes);
        }
    }

    let started = Instant::now();
    let before = host.stats();
    let live: Vec<usize> = (0..taken.len()).filter(|&i| taken[i].request.is_ok()).collect();
    let requests: Vec<&Request> = live.iter().map(|&i| taken[i].request.as_ref().unwrap()).collect();
    let replies = with_signals_blocked(|| {
        if merge {
            serve(host, cfg, &requests, &mut || ())
        } else {
            requests.iter().map(|r| serve(host, cfg, &[r], &mut || ()).remove(0)).collect()
        }
    });
    let run_us = started.elapsed().as_micros() as u64;
    let after = host.stats();

    let mut texts = 0;
    let mut pairs = 0;
    let mut errors = 0;
    let mut answers: Vec<Option<Result<Output>>> = taken.iter().map(|_| None).collect();
    for (&i, reply) in live.iter().zip(replies) {
        match &taken[i].request.as_ref().unwrap().job {
            Job::Embed { texts: t, .. } => texts += t.len() as u64,
            Job::Rerank { pairs: p } => pairs += p.len() as u64,
            Job::CountTokens { .. } => {}
        }
        answers[i] = Some(reply);
    }
    let mut wait_us = 0u64;
    let mut latches = Vec::new();
    for (t, answer) in taken.iter_mut().zip(answers) {
        let answer = answer.unwrap_or_else(|| match &t.request {
            Err(e) => Err(e.clone()),
            Ok(_) => unreachable!("answered above"),
        });
        let mut reply_len = 0;
        if !t.segment.is_null() {
            errors += u64::from(answer.is_err());
            // SAFETY: the segment is at least request_len + reply capacity long (Request::reply_capacity).
            unsafe {
                let total = pg_sys::dsm_segment_map_length(t.segment);
                let room = std::slice::from_raw_parts_mut(
                    segment_address(t.segment).add(t.request_len),
                    total.saturating_sub(t.request_len),
                );
                reply_len = encode_reply(&answer, room);
                pg_sys::dsm_detach(t.segment);
            }
        }
        wait_us += (now - t.queued_at).max(0) as u64;
        let mut s = STATE.exclusive();
        let slot = &mut s.slots[t.slot];
        if slot.seq == t.seq {
            match slot.state {
                SlotState::Abandoned => slot.state = SlotState::Free,
                SlotState::Running if !t.segment.is_null() => {
                    slot.state = SlotState::Done;
                    slot.reply_len = reply_len as u32;
                    latches.push(slot.latch);
                }
                SlotState::Running => slot.state = SlotState::Free,
                _ => {}
            }
        }
    }
    let models = loaded_models(host);
    {
        let mut s = STATE.exclusive();
        let c = &mut s.counters;
        c.batches += 1;
        c.requests += taken.len() as u64;
        c.texts += texts;
        c.pairs += pairs;
        c.embed_runs += after.embed_runs - before.embed_runs;
        c.rerank_runs += after.rerank_runs - before.rerank_runs;
        c.wait_us += wait_us;
        c.run_us += run_us;
        c.errors += errors;
        s.set_models(&models);
    }
    latches.into_iter().for_each(wake);
}

/// On SIGTERM: requests not answered yet fail at once (their backends get an ERROR), and the postmaster starts a
/// new worker after a second.
fn shut_down() {
    {
        let mut s = STATE.exclusive();
        s.worker_pid = 0;
        s.worker_latch = std::ptr::null_mut();
        for slot in s.slots.iter_mut() {
            match slot.state {
                SlotState::Pending | SlotState::Running => {
                    slot.state = SlotState::Failed;
                    wake(slot.latch);
                }
                SlotState::Abandoned => slot.state = SlotState::Free,
                _ => {}
            }
        }
    }
    log!("pg_feedback inference worker exiting");
    // SAFETY: exit code 1: the postmaster restarts the worker after bgw_restart_time.
    unsafe { pg_sys::proc_exit(1) };
}

fn segment_address(segment: *mut pg_sys::dsm_segment) -> *mut u8 {
    // SAFETY: a segment we attached.
    unsafe { pg_sys::dsm_segment_address(segment).cast() }
}

/// Runs `f` with every signal blocked in this thread: threads ONNX Runtime creates meanwhile inherit the mask, so
/// Postgres' handlers never run on them. Signals that arrive meanwhile are delivered when `f` returns.
fn with_signals_blocked<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: plain sigprocmask calls on this thread's mask, restored afterwards.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        let result = f();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        result
    }
}

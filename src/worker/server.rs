//! The worker. Its main thread is the only one that touches Postgres: it sleeps on its latch (backends set it when
//! they queue a request) and on an eventfd (runners write it when they finish), takes every pending request, maps
//! its segment and hands it to the runners; when a runner is done it marks the slot answered and wakes the backend.
//!
//! Runners are plain threads (`pg_feedback.worker_runners`, one per CPU by default), each with its own `LocalHost`:
//! one request runs on one core, as it would in its backend, while other requests run beside it.
//!
//! Sharing: the main thread hands a request to a runner only when one is free, so it can choose. It takes the
//! waiting request of the login role with the fewest requests running (oldest first among equals), and a big
//! request (over [`BIG_REQUEST_BYTES`]) never takes the last free runner: one role cannot hold every runner, and
//! small requests (a query's embedding, a rerank) always find one within one small request's time. A request
//! whose backend stopped waiting (cancelled, timed out) is dropped from the queue, and a runner working on it
//! stops at its next check (between tokenizer chunks of 64 inputs or 64 kB, before every model run) through its
//! cancel flag. They never call
//! Postgres: they read the request and write the reply in the mapped segment, and send a completion. They and the
//! ONNX Runtime threads they create start with every signal blocked, so Postgres' handlers run on the main thread
//! only, which never runs a model and so answers SIGTERM, SIGHUP and barriers at once.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use feedback_core::model::cancel::{cancellable, CancelFlag};
use feedback_core::model::remote::{encode_reply, serve, Job, Output, Request};
use feedback_core::model::{HostConfig, HostStats, LocalHost, ModelError, ModelHost, Result, TextRole};
use pgrx::bgworkers::{BackgroundWorker, SignalWakeFlags};
use pgrx::pg_sys;
use pgrx::prelude::*;

use super::client::{CANCEL_AT, HEADER, MAGIC};
use super::shared::{alive, wake, Counters, SlotState, STATE};
use crate::gucs;

/// A request of more bytes than this is big: it never takes the last free runner (see the module documentation).
/// Ordinary calls stay below it (a query, a rerank of 20 notes, a chunk of 64 notes of a few hundred bytes).
const BIG_REQUEST_BYTES: usize = 64 * 1024;

/// A mapped request handed to a runner. The segment stays mapped (by the main thread) until its completion is back.
struct Item {
    slot: usize,
    seq: u64,
    segment: *mut pg_sys::dsm_segment,
    reply: ReplyArea,
    request: Request,
    /// The backend's login role, and whether the request is big.
    owner: u32,
    big: bool,
}

impl Item {
    /// The request's cancel flag, in its segment's header (mapped as long as the item lives).
    fn cancel(&self) -> CancelFlag<'_> {
        // SAFETY: the mapping starts with the header (checked when the item was taken); page-aligned, so aligned.
        unsafe { CancelFlag::from_ptr(self.reply.base.add(CANCEL_AT).cast::<u32>()) }
    }
}

/// Where a request's reply goes in its mapped segment, for whoever writes it (a runner never calls Postgres).
struct ReplyArea {
    base: *mut u8,
    len: usize,
    reply_at: usize,
}

impl ReplyArea {
    fn write(&self, reply: &Result<Output>) -> usize {
        // SAFETY: the mapping is `len` bytes long (reply_at <= len, checked when it was taken) and stays mapped until
        // the request's completion is received; the backend reads the reply area only after the slot says Done.
        let room = unsafe { std::slice::from_raw_parts_mut(self.base.add(self.reply_at), self.len - self.reply_at) };
        encode_reply(reply, room)
    }
}

// SAFETY: a runner only reads the request and writes the reply area of the mapping, which the main thread keeps
// mapped and does not touch until the runner's completion arrives.
unsafe impl Send for Item {}

/// Requests that run together: one (batch_merge off) or all pending ones (on).
struct Work {
    items: Vec<Item>,
    cfg: HostConfig,
}

/// What a runner reports per finished request, and once per work unit (stats). A runner's warm-up reports one
/// with no items.
struct Finished {
    items: Vec<(Item, usize, bool)>,
    stats: HostStats,
    loaded: Vec<String>,
    run_us: u64,
    texts: u64,
    pairs: u64,
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn _fb_worker_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    BackgroundWorker::connect_worker_to_spi(None, None);
    let runners = gucs::worker_runners();
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
        s.runners = runners as u32;
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
    // SAFETY: a plain eventfd, non-blocking: runners write to it, the main thread waits on it and drains it.
    let event = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if event < 0 {
        error!("pg_feedback inference worker: could not create an eventfd: {}", std::io::Error::last_os_error());
    }
    // SIGINT would cancel a "query" of this process: there is none, and an ERROR here would end the worker.
    // SAFETY: ignoring a signal.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    let (work_tx, work_rx) = channel::<Work>();
    let (done_tx, done_rx) = channel::<Finished>();
    let work_rx = Arc::new(Mutex::new(work_rx));
    let threads: Vec<JoinHandle<()>> = with_signals_blocked(|| {
        (0..runners)
            .map(|_| {
                let (rx, tx, cfg) = (Arc::clone(&work_rx), done_tx.clone(), cfg.clone());
                let names = (gucs::embedding_model(), gucs::rerank_model());
                let idle = idle_threads(runners);
                std::thread::spawn(move || runner(rx, tx, event, cfg, idle, names))
            })
            .collect()
    });
    drop(done_tx);
    *RUNNERS.lock().unwrap_or_else(|p| p.into_inner()) = Some((work_tx, threads));
    // Whatever ends this process (SIGTERM, an ERROR on this thread), the runners stop before segments are unmapped.
    // SAFETY: registering an exit callback.
    unsafe { pg_sys::before_shmem_exit(Some(stop_runners), pg_sys::Datum::from(0)) };
    log!("pg_feedback inference worker started: {runners} runners, {} intra-op thread(s) each", cfg.intra_threads);

    let mut mapped = 0usize;
    let mut share = Share::new(runners);
    // Read here and on reload, not per dispatch (one per CPU means reading the CPU count).
    let mut idle = idle_threads(runners);
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
            idle = idle_threads(runners);
        }
        while let Ok(finished) = done_rx.try_recv() {
            mapped -= finished.items.len();
            share.finished(&finished);
            complete(finished);
        }
        let merge = gucs::batch_merge();
        if has_pending() {
            if merge && !gucs::batch_wait().is_zero() {
                // Let requests that arrive together share the run.
                std::thread::sleep(gucs::batch_wait());
            }
            let items = take_pending();
            mapped += items.len();
            share.queue.extend(items);
        }
        mapped -= share.drop_cancelled();
        let cfg = worker_config();
        while let Some(items) = share.next(merge) {
            // A lone embedding run (no other runner busy, nothing waiting) may use the idle runners' cores too.
            // Only embeddings: they are most of a retrieval's time (a code input embeds its segments), and a second
            // cross-encoder session per runner would cost its memory for the few pairs selective reranking scores.
            let lone = share.busy == 1 && share.queue.is_empty();
            let embeds = items.iter().all(|i| matches!(i.request.job, Job::Embed { .. }));
            let threads = if lone && embeds { idle } else { cfg.intra_threads };
            dispatch(Work { items, cfg: HostConfig { intra_threads: threads, ..cfg.clone() } });
        }
        wait(event, Duration::from_secs(1));
    }
    // SIGTERM: fail what is not answered yet (backends get an ERROR at once) and exit. Exit code 1: the postmaster
    // starts a new worker after bgw_restart_time. stop_runners waits for the runs in progress first.
    fail_all();
    log!("pg_feedback inference worker exiting ({mapped} requests were in progress)");
    // SAFETY: a normal exit through Postgres' exit callbacks.
    unsafe { pg_sys::proc_exit(1) };
}

/// The requests taken but not yet handed to a runner, and what the runners are doing: who gets the next free one.
struct Share {
    runners: usize,
    busy: usize,
    big_busy: usize,
    /// Requests running per login role.
    running: HashMap<u32, usize>,
    queue: Vec<Item>,
}

impl Share {
    fn new(runners: usize) -> Share {
        Share { runners: runners.max(1), busy: 0, big_busy: 0, running: HashMap::new(), queue: Vec::new() }
    }

    /// The next unit of work for a free runner, if a runner is free and a request may take it.
    fn next(&mut self, merge: bool) -> Option<Vec<Item>> {
        if self.busy >= self.runners || self.queue.is_empty() {
            return None;
        }
        // A big request may not take the last free runner (with one runner there is no choice).
        let big_allowed = self.runners == 1 || self.big_busy + 1 < self.runners;
        let items = if merge {
            let (take, keep): (Vec<Item>, Vec<Item>) =
                std::mem::take(&mut self.queue).into_iter().partition(|i| big_allowed || !i.big);
            self.queue = keep;
            take
        } else {
            let i = (0..self.queue.len()).filter(|&i| big_allowed || !self.queue[i].big).min_by_key(|&i| {
                let item = &self.queue[i];
                (self.running.get(&item.owner).copied().unwrap_or(0), item.seq)
            })?;
            vec![self.queue.remove(i)]
        };
        if items.is_empty() {
            return None;
        }
        self.busy += 1;
        if items.iter().any(|i| i.big) {
            self.big_busy += 1;
        }
        for item in &items {
            *self.running.entry(item.owner).or_insert(0) += 1;
        }
        Some(items)
    }

    /// A runner is free again (a warm-up report has no items: its runner was never counted busy).
    fn finished(&mut self, finished: &Finished) {
        if finished.items.is_empty() {
            return;
        }
        self.busy = self.busy.saturating_sub(1);
        if finished.items.iter().any(|(i, _, _)| i.big) {
            self.big_busy = self.big_busy.saturating_sub(1);
        }
        for (item, _, _) in &finished.items {
            if let Some(n) = self.running.get_mut(&item.owner) {
                *n -= 1;
                if *n == 0 {
                    self.running.remove(&item.owner);
                }
            }
        }
    }

    /// Frees the queued requests whose backend stopped waiting; returns how many.
    fn drop_cancelled(&mut self) -> usize {
        let (gone, keep): (Vec<Item>, Vec<Item>) =
            std::mem::take(&mut self.queue).into_iter().partition(|i| i.cancel().is_set());
        self.queue = keep;
        for item in &gone {
            // SAFETY: mapped by take_pending; no runner has it.
            unsafe { pg_sys::dsm_detach(item.segment) };
            finish(item.slot, item.seq, None);
        }
        gone.len()
    }
}

type Runners = (Sender<Work>, Vec<JoinHandle<()>>);
static RUNNERS: Mutex<Option<Runners>> = Mutex::new(None);

/// Hands work to a free runner (`Share` sends only as many units as there are free runners).
fn dispatch(work: Work) {
    let runners = RUNNERS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((tx, _)) = runners.as_ref() {
        let _ = tx.send(work);
    }
}

/// Exit callback: no more work, and each runner finishes the run it is in (runners write into mapped segments,
/// which Postgres unmaps after this), so a worker that ends for any reason never pulls memory from under a runner.
#[pg_guard]
unsafe extern "C-unwind" fn stop_runners(_code: std::ffi::c_int, _arg: pg_sys::Datum) {
    let runners = RUNNERS.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some((tx, threads)) = runners {
        drop(tx);
        for t in threads {
            let _ = t.join();
        }
    }
}

/// Intra-op threads of a lone embedding run. With one runner every run is lone, and its operator chose one runner's
/// worth of threads: then the runner's own count.
fn idle_threads(runners: usize) -> usize {
    if runners > 1 {
        gucs::worker_idle_threads()
    } else {
        gucs::worker_threads()
    }
}

/// The worker's host settings: the session's, but with the worker's thread count.
fn worker_config() -> HostConfig {
    HostConfig { intra_threads: gucs::worker_threads(), ..gucs::host_config() }
}

/// A runner: takes work, answers it with its own host (with the thread count the work names), reports back,
/// wakes the main thread.
fn runner(
    work: Arc<Mutex<Receiver<Work>>>,
    done: Sender<Finished>,
    event: i32,
    cfg: HostConfig,
    idle_threads: usize,
    names: (String, String),
) {
    let mut host = LocalHost::new();
    // Both thread counts an embedding run may get.
    if idle_threads != cfg.intra_threads {
        let idle = HostConfig { intra_threads: idle_threads, ..cfg.clone() };
        let _ = catch_unwind(AssertUnwindSafe(|| warm_up(&mut host, &idle, &(names.0.clone(), String::new()))));
    }
    let _ = catch_unwind(AssertUnwindSafe(|| warm_up(&mut host, &cfg, &names)));
    let warm = Finished {
        items: Vec::new(),
        stats: HostStats::ZERO,
        loaded: loaded_models(&host),
        run_us: 0,
        texts: 0,
        pairs: 0,
    };
    let _ = done.send(warm);
    notify(event);
    loop {
        let next = work.lock().unwrap_or_else(|p| p.into_inner()).recv();
        let Ok(work) = next else { return };
        if done.send(run(&mut host, work)).is_err() {
            return;
        }
        notify(event);
    }
}

/// One unit of work: every request gets a reply written into its segment, whatever happens (a panic becomes an
/// error reply).
fn run(host: &mut LocalHost, Work { items, cfg }: Work) -> Finished {
    let started = Instant::now();
    let before = host.stats();
    let requests: Vec<&Request> = items.iter().map(|i| &i.request).collect();
    // Stops when every backend of the unit stopped waiting (one, unless batch_merge): checked before every
    // tokenizer chunk and every model run.
    let cancelled = || items.iter().all(|i| i.cancel().is_set());
    let served = catch_unwind(AssertUnwindSafe(|| {
        if cancelled() {
            return Err(ModelError::Cancelled);
        }
        let mut between = || {
            if cancelled() {
                feedback_core::model::cancel::stop();
            }
        };
        cancellable(|| Ok(serve(host, &cfg, &requests, &mut between)))
    }));
    let replies = match served {
        Ok(Ok(replies)) => replies,
        Ok(Err(e)) => requests.iter().map(|_| Err(e.clone())).collect(),
        Err(_) => requests
            .iter()
            .map(|_| Err(ModelError::Worker { reason: "had an internal error running this request".into() }))
            .collect(),
    };
    let after = host.stats();
    let (mut texts, mut pairs) = (0, 0);
    for r in &requests {
        match &r.job {
            Job::Embed { texts: t, .. } => texts += t.len() as u64,
            Job::Rerank { pairs: p } => pairs += p.len() as u64,
            Job::CountTokens { .. } => {}
        }
    }
    let items = items
        .into_iter()
        .zip(replies)
        .map(|(item, reply)| {
            let len = catch_unwind(AssertUnwindSafe(|| item.reply.write(&reply))).unwrap_or(0);
            (item, len, reply.is_err())
        })
        .collect();
    let stats = HostStats {
        embed_runs: after.embed_runs - before.embed_runs,
        rerank_runs: after.rerank_runs - before.rerank_runs,
        ..HostStats::ZERO
    };
    let run_us = started.elapsed().as_micros() as u64;
    Finished { items, stats, loaded: loaded_models(host), run_us, texts, pairs }
}

/// Loads the configured models (embedding, cross-encoder) when a runner starts, so the first request of the first
/// session does not pay. A model that cannot load fails its requests later, with the reason (a runner does not log:
/// that is a Postgres call).
fn warm_up(host: &mut LocalHost, cfg: &HostConfig, (embed, rerank): &(String, String)) {
    let _ = host.embed(cfg, embed, &["warm up"], TextRole::Query, &mut || ());
    if !rerank.is_empty() {
        let _ = host.rerank(cfg, rerank, "warm up", &["warm up"], &mut || ());
    }
}

fn loaded_models(host: &LocalHost) -> Vec<String> {
    host.loaded().into_iter().map(|(kind, key)| format!("{kind}: {key}")).collect()
}

fn has_pending() -> bool {
    STATE.share().slots.iter().any(|s| s.state == SlotState::Pending)
}

/// Takes every pending request: marks it running, maps its segment and reads it. A request that cannot be read is
/// answered at once; one whose backend gave up (no segment) is freed.
fn take_pending() -> Vec<Item> {
    // SAFETY: plain reads of this process's globals.
    let (me, now) = unsafe { (pg_sys::MyProcPid, pg_sys::GetCurrentTimestamp()) };
    let taken: Vec<(usize, u64, pg_sys::dsm_handle, usize, u32)> = {
        let mut s = STATE.exclusive();
        // Replies nobody will read: their backend exited (a FATAL does not unwind to give the slot up).
        for slot in s.slots.iter_mut() {
            if matches!(slot.state, SlotState::Done | SlotState::Failed) && !alive(slot.owner_pid) {
                slot.state = SlotState::Free;
            }
        }
        let mut wait_us = 0u64;
        let taken = s
            .slots
            .iter_mut()
            .enumerate()
            .filter(|(_, slot)| slot.state == SlotState::Pending)
            .map(|(i, slot)| {
                slot.state = SlotState::Running;
                slot.worker_pid = me;
                wait_us += (now - slot.queued_at).max(0) as u64;
                (i, slot.seq, slot.handle, slot.request_len as usize, slot.owner_role)
            })
            .collect::<Vec<_>>();
        s.counters.wait_us += wait_us;
        s.counters.requests += taken.len() as u64;
        s.counters.batches += 1;
        taken
    };
    let mut items = Vec::with_capacity(taken.len());
    for (slot, seq, handle, request_len, owner) in taken {
        // SAFETY: NULL when the backend gave up and its segment is gone; detached when the request completes.
        let segment = unsafe { pg_sys::dsm_attach(handle) };
        if segment.is_null() {
            finish(slot, seq, None);
            continue;
        }
        // SAFETY: a segment we just mapped, `len` bytes long.
        let (base, len) =
            unsafe { (pg_sys::dsm_segment_address(segment).cast::<u8>(), pg_sys::dsm_segment_map_length(segment)) };
        // SAFETY: reads within the mapping (length checked first); the backend wrote the header before it made the
        // slot pending.
        let ours = len >= HEADER + request_len
            && unsafe {
                base.cast::<u64>().read_unaligned() == MAGIC && base.cast::<u64>().add(1).read_unaligned() == seq
            };
        if !ours {
            // Not this request's segment (a recycled handle): touch nothing in it.
            // SAFETY: mapped above, used by nobody else.
            unsafe { pg_sys::dsm_detach(segment) };
            finish(slot, seq, None);
            continue;
        }
        // SAFETY: checked above: the request's bytes are inside the mapping.
        let bytes = unsafe { std::slice::from_raw_parts(base.add(HEADER), request_len) };
        let reply = ReplyArea { base, len, reply_at: HEADER + request_len };
        match Request::decode(bytes) {
            Ok(request) => {
                items.push(Item { slot, seq, segment, reply, request, owner, big: request_len > BIG_REQUEST_BYTES })
            }
            Err(e) => {
                let n = reply.write(&Err(e));
                // SAFETY: mapped above, used by nobody else.
                unsafe { pg_sys::dsm_detach(segment) };
                STATE.exclusive().counters.errors += 1;
                finish(slot, seq, Some(n));
            }
        }
    }
    items
}

/// A runner's completions: unmap, mark answered, wake the backends, count.
fn complete(finished: Finished) {
    let errors = finished.items.iter().filter(|(_, _, failed)| *failed).count() as u64;
    for (item, len, _) in &finished.items {
        // SAFETY: mapped by take_pending; the runner is done with it.
        unsafe { pg_sys::dsm_detach(item.segment) };
        finish(item.slot, item.seq, Some(*len));
    }
    let mut s = STATE.exclusive();
    let c: &mut Counters = &mut s.counters;
    c.texts += finished.texts;
    c.pairs += finished.pairs;
    c.embed_runs += finished.stats.embed_runs;
    c.rerank_runs += finished.stats.rerank_runs;
    c.run_us += finished.run_us;
    c.errors += errors;
    if !finished.loaded.is_empty() {
        s.add_models(&finished.loaded);
    }
}

/// Marks a taken request answered (`reply_len`) or, without a reply, freed; wakes its backend.
fn finish(slot: usize, seq: u64, reply_len: Option<usize>) {
    let latch = {
        let mut s = STATE.exclusive();
        let slot = &mut s.slots[slot];
        if slot.seq != seq {
            return;
        }
        match (slot.state, reply_len) {
            (SlotState::Running, Some(n)) => {
                slot.state = SlotState::Done;
                slot.reply_len = n as u32;
                slot.latch
            }
            (SlotState::Running | SlotState::Abandoned, _) => {
                slot.state = SlotState::Free;
                std::ptr::null_mut()
            }
            _ => std::ptr::null_mut(),
        }
    };
    wake(latch);
}

/// Fails every request not answered yet (the worker is exiting).
fn fail_all() {
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

/// Sleeps until the latch is set, a runner writes the eventfd, or `timeout` (exits if the postmaster dies).
fn wait(event: i32, timeout: Duration) {
    // SAFETY: our latch and our eventfd.
    unsafe {
        pg_sys::WaitLatchOrSocket(
            pg_sys::MyLatch,
            (pg_sys::WL_LATCH_SET | pg_sys::WL_SOCKET_READABLE | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH)
                as i32,
            event,
            timeout.as_millis() as std::ffi::c_long,
            pg_sys::PG_WAIT_EXTENSION,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
        let mut count = 0u64;
        libc::read(event, (&raw mut count).cast(), 8);
    }
}

/// Tells the main thread a completion is waiting (a runner may not set a latch: that is a Postgres call).
fn notify(event: i32) {
    let one = 1u64;
    // SAFETY: an 8-byte write to our eventfd.
    unsafe { libc::write(event, (&raw const one).cast(), 8) };
}

/// Runs `f` with every signal blocked in this thread: threads created meanwhile (the runners, and through them ONNX
/// Runtime's) inherit the mask, so Postgres' handlers never run on them.
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

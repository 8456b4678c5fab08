//! What backends and the worker share: a fixed array of request slots and the worker's counters, under one LWLock
//! held only to read or flip a few fields (never while a model runs or a segment is mapped).
//!
//! A request's bytes live in a dynamic shared memory segment the backend creates; its slot carries the segment's
//! handle, the backend's latch and a sequence number, so a slot reused by another request is never mistaken for
//! the old one.

use pgrx::lwlock::PgLwLock;
use pgrx::pg_sys;
use pgrx::shmem::PGRXSharedMemory;

/// Requests in flight at once (a backend has at most one); a backend finding none free waits for one.
pub const SLOTS: usize = 256;
/// Models the view lists (the worker keeps at most two of each kind loaded).
pub const MODELS: usize = 4;
const KEY_BYTES: usize = 160;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum SlotState {
    Free = 0,
    /// Written by a backend, not yet taken by the worker.
    Pending = 1,
    /// Taken by the worker (`worker_pid`).
    Running = 2,
    /// Answered: the reply is in the segment.
    Done = 3,
    /// The backend stopped waiting (cancelled) while the worker ran it: the worker frees it.
    Abandoned = 4,
    /// The worker exited without answering.
    Failed = 5,
}

#[derive(Clone, Copy)]
#[repr(C)]
pub struct Slot {
    pub state: SlotState,
    pub seq: u64,
    pub handle: pg_sys::dsm_handle,
    pub request_len: u32,
    pub reply_len: u32,
    pub owner_pid: i32,
    /// The backend's login role (its session user): the worker shares its runners between roles.
    pub owner_role: u32,
    pub latch: *mut pg_sys::Latch,
    pub worker_pid: i32,
    pub queued_at: i64,
}

impl Slot {
    const EMPTY: Slot = Slot {
        state: SlotState::Free,
        seq: 0,
        handle: 0,
        request_len: 0,
        reply_len: 0,
        owner_pid: 0,
        owner_role: 0,
        latch: std::ptr::null_mut(),
        worker_pid: 0,
        queued_at: 0,
    };
}

/// Counters since the server started (they survive worker restarts).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Counters {
    pub batches: u64,
    pub requests: u64,
    pub texts: u64,
    pub pairs: u64,
    pub embed_runs: u64,
    pub rerank_runs: u64,
    pub wait_us: u64,
    pub run_us: u64,
    pub errors: u64,
}

impl Counters {
    pub const ZERO: Counters = Counters {
        batches: 0,
        requests: 0,
        texts: 0,
        pairs: 0,
        embed_runs: 0,
        rerank_runs: 0,
        wait_us: 0,
        run_us: 0,
        errors: 0,
    };
}

#[derive(Clone, Copy)]
#[repr(C)]
pub struct State {
    pub worker_pid: i32,
    pub worker_latch: *mut pg_sys::Latch,
    pub starts: u64,
    pub started_at: i64,
    pub runners: u32,
    pub threads: u32,
    pub merge: bool,
    pub next_seq: u64,
    pub counters: Counters,
    pub models: [[u8; KEY_BYTES]; MODELS],
    pub slots: [Slot; SLOTS],
}

// SAFETY: plain data; the latch pointers point into shared memory (PGPROC), valid in every process.
unsafe impl PGRXSharedMemory for State {}

impl State {
    pub const fn new() -> Self {
        State {
            worker_pid: 0,
            worker_latch: std::ptr::null_mut(),
            starts: 0,
            started_at: 0,
            runners: 0,
            threads: 0,
            merge: false,
            next_seq: 1,
            counters: Counters::ZERO,
            models: [[0; KEY_BYTES]; MODELS],
            slots: [Slot::EMPTY; SLOTS],
        }
    }

    /// Adds the models a runner has loaded to the list the view shows (each once; the first MODELS).
    pub fn add_models(&mut self, models: &[String]) {
        let mut all = model_names(&self.models);
        // A runner may hold one model twice (two thread counts): listed once.
        for m in models {
            if !all.contains(m) {
                all.push(m.clone());
            }
        }
        self.models = [[0; KEY_BYTES]; MODELS];
        for (dst, m) in self.models.iter_mut().zip(&all) {
            let n = m.len().min(KEY_BYTES - 1);
            dst[..n].copy_from_slice(&m.as_bytes()[..n]);
        }
    }
}

// SAFETY: the name is unique to this extension.
pub static STATE: PgLwLock<State> = unsafe { PgLwLock::new(c"pg_feedback_worker") };

/// The view's copy of the state.
pub struct Snapshot {
    pub pid: i32,
    pub started_at: i64,
    pub starts: u64,
    pub runners: u32,
    pub threads: u32,
    pub merge: bool,
    pub models: Vec<String>,
    pub queue_depth: usize,
    pub in_flight: usize,
    pub counters: Counters,
}

pub fn snapshot() -> Snapshot {
    let s = STATE.share();
    let count = |st: SlotState| s.slots.iter().filter(|x| x.state == st).count();
    let models = model_names(&s.models);
    Snapshot {
        pid: s.worker_pid,
        started_at: s.started_at,
        starts: s.starts,
        runners: s.runners,
        threads: s.threads,
        merge: s.merge,
        models,
        queue_depth: count(SlotState::Pending),
        in_flight: count(SlotState::Running),
        counters: s.counters,
    }
}

fn model_names(models: &[[u8; KEY_BYTES]; MODELS]) -> Vec<String> {
    models
        .iter()
        .map(|m| String::from_utf8_lossy(&m[..m.iter().position(|&b| b == 0).unwrap_or(m.len())]).into_owned())
        .filter(|m| !m.is_empty())
        .collect()
}

/// Wakes the process waiting on `latch` (a no-op for a null latch).
pub fn wake(latch: *mut pg_sys::Latch) {
    if !latch.is_null() {
        // SAFETY: latches of PGPROC entries live in shared memory for the life of the server.
        unsafe { pg_sys::SetLatch(latch) }
    }
}

/// Whether process `pid` still exists.
pub fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists (the worker runs as the same OS user).
    pid > 0 && unsafe { libc::kill(pid, 0) } == 0
}

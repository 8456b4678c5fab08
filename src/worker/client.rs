//! A backend's side of the worker: the request's bytes in a new dynamic shared memory segment (with room for the
//! reply), a slot pointing at it, the worker's latch set, and a wait on our own latch, checking for interrupts
//! every wake-up. A cancelled wait gives the slot up and sets the request's cancel flag in the segment, so the
//! worker stops the work at its next check (between tokenizer chunks and model runs) and drops the reply; a worker
//! that exits or never answers gives an ERROR, never a hang.

use std::time::{Duration, Instant};

use feedback_core::model::cancel::CancelFlag;
use feedback_core::model::remote::{decode_reply, Output, Request, Transport};
use feedback_core::model::{ModelError, Result};
use pgrx::pg_sys;

use super::shared::{alive, wake, SlotState, SLOTS, STATE};
use crate::gucs;

/// The longest a wait sleeps before it looks at the slot again (a set latch wakes it at once).
const POLL: Duration = Duration::from_millis(50);

/// Sends requests through shared memory to the worker.
pub struct Shm;

impl Transport for Shm {
    fn call(&mut self, request: &Request, between: &mut dyn FnMut()) -> Result<Output> {
        let bytes = request.encode();
        let capacity = request.reply_capacity(gucs::DIMENSIONS);
        let segment = Segment::create(HEADER + bytes.len() + capacity);
        // SAFETY: the segment is ours and at least this long; the header is written when a slot is claimed.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), segment.address().add(HEADER), bytes.len()) };
        let deadline = Instant::now() + gucs::worker_timeout();
        let mut pending = enqueue(&segment, bytes.len(), deadline, between)?;
        let lost = |why: &str| Err(ModelError::Worker { reason: why.to_string() });
        loop {
            wait(POLL);
            between();
            let (seq, state, reply_len, worker_pid, current) = {
                let s = STATE.share();
                let slot = &s.slots[pending.slot];
                (slot.seq, slot.state, slot.reply_len as usize, slot.worker_pid, s.worker_pid)
            };
            if seq != pending.seq {
                pending.done = true; // not ours any more: leave it alone
                return lost("lost track of this request (its slot was reused)");
            }
            match state {
                SlotState::Done if reply_len <= capacity => {
                    // SAFETY: the worker wrote reply_len bytes after the request, within the reserved capacity.
                    let reply =
                        unsafe { std::slice::from_raw_parts(segment.address().add(HEADER + bytes.len()), reply_len) };
                    let output = decode_reply(reply);
                    pending.release();
                    return output;
                }
                SlotState::Done => {
                    pending.release();
                    return lost("sent a reply longer than the room reserved for it");
                }
                SlotState::Failed => {
                    pending.release();
                    return lost("exited before it answered this request");
                }
                SlotState::Running if worker_pid != current || !alive(worker_pid) => {
                    pending.release();
                    return lost("exited while it ran this request");
                }
                SlotState::Pending | SlotState::Running if Instant::now() > deadline => {
                    pending.release();
                    return lost("did not answer this request within pg_feedback.worker_timeout");
                }
                SlotState::Pending | SlotState::Running => {}
                SlotState::Free | SlotState::Abandoned => {
                    pending.done = true;
                    return lost("lost track of this request (its slot was freed)");
                }
            }
        }
    }
}

/// The segment starts with a header the worker checks before it reads the request: [`MAGIC`] and the request's
/// sequence number, so a recycled segment handle can never make it read or write someone else's memory; then the
/// request's cancel flag (a u32 at [`CANCEL_AT`], set by the backend, read by the worker's runners).
pub const HEADER: usize = 24;
pub const CANCEL_AT: usize = 16;
pub const MAGIC: u64 = 0x6662_5f72_6571_7631; // "fb_reqv1"

/// Claims a free slot for the segment and wakes the worker; waits (bounded) while every slot is in use.
fn enqueue(segment: &Segment, request_len: usize, deadline: Instant, between: &mut dyn FnMut()) -> Result<Pending> {
    loop {
        let claimed = {
            let mut s = STATE.exclusive();
            let seq = s.next_seq;
            let latch = s.worker_latch;
            // SAFETY: plain reads of this backend's globals.
            let (pid, my_latch, now) = unsafe { (pg_sys::MyProcPid, pg_sys::MyLatch, pg_sys::GetCurrentTimestamp()) };
            s.slots.iter().position(|slot| slot.state == SlotState::Free).map(|i| {
                // SAFETY: our segment has HEADER bytes at its start; written before the slot becomes visible.
                unsafe {
                    let header = segment.address().cast::<u64>();
                    header.write_unaligned(MAGIC);
                    header.add(1).write_unaligned(seq);
                    segment.cancel_flag().clear();
                }
                let slot = &mut s.slots[i];
                slot.state = SlotState::Pending;
                slot.seq = seq;
                slot.handle = segment.handle();
                slot.request_len = request_len as u32;
                slot.reply_len = 0;
                slot.owner_pid = pid;
                // SAFETY: the session's login role, a plain read.
                slot.owner_role = unsafe { pg_sys::GetSessionUserId() }.to_u32();
                slot.latch = my_latch;
                slot.worker_pid = 0;
                slot.queued_at = now;
                s.next_seq += 1;
                // SAFETY: the flag lives in our segment, which outlives the claim (dropped after it).
                let cancel = unsafe { segment.cancel_flag() };
                (Pending { slot: i, seq, done: false, cancel }, latch)
            })
        };
        if let Some((pending, worker_latch)) = claimed {
            wake(worker_latch);
            return Ok(pending);
        }
        if Instant::now() > deadline {
            return Err(ModelError::Worker {
                reason: format!("had all {SLOTS} request slots in use for pg_feedback.worker_timeout"),
            });
        }
        wait(Duration::from_millis(1));
        between();
    }
}

/// Our claim on a slot. Dropped without `release` (a cancellation unwinding through the wait), it gives the slot
/// up: freed if the worker has not taken it, marked abandoned (the worker frees it) if it has, with the cancel flag
/// set so that a runner working on it stops.
struct Pending {
    slot: usize,
    seq: u64,
    done: bool,
    cancel: CancelFlag<'static>,
}

impl Pending {
    fn release(&mut self) {
        let mut s = STATE.exclusive();
        let slot = &mut s.slots[self.slot];
        if slot.seq == self.seq {
            if slot.state != SlotState::Done {
                self.cancel.set();
            }
            // A live worker still uses the segment: it frees the slot when it is done. Otherwise nobody will.
            slot.state = match slot.state {
                SlotState::Running if alive(slot.worker_pid) => SlotState::Abandoned,
                _ => SlotState::Free,
            };
        }
        self.done = true;
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.done {
            self.release();
        }
    }
}

/// A dynamic shared memory segment this backend created; detached when dropped (also on an ERROR: it belongs to
/// the current resource owner). The worker keeps its own mapping while it uses it.
struct Segment(*mut pg_sys::dsm_segment);

impl Segment {
    fn create(len: usize) -> Segment {
        // SAFETY: dsm_create raises an ERROR itself when it cannot create the segment.
        Segment(unsafe { pg_sys::dsm_create(len, 0) })
    }

    fn handle(&self) -> pg_sys::dsm_handle {
        // SAFETY: a live segment.
        unsafe { pg_sys::dsm_segment_handle(self.0) }
    }

    fn address(&self) -> *mut u8 {
        // SAFETY: a live segment.
        unsafe { pg_sys::dsm_segment_address(self.0).cast() }
    }

    /// The request's cancel flag in the header.
    ///
    /// # Safety
    /// Valid while the segment is attached: the caller must not use it after the segment is dropped.
    unsafe fn cancel_flag(&self) -> CancelFlag<'static> {
        // SAFETY: segments are page-aligned and at least HEADER long, so the word is aligned and inside.
        unsafe { CancelFlag::from_ptr(self.address().add(CANCEL_AT).cast::<u32>()) }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: attached by us, detached once.
        unsafe { pg_sys::dsm_detach(self.0) }
    }
}

/// Sleeps on this backend's latch for at most `timeout` (exits if the postmaster dies).
pub fn wait(timeout: Duration) {
    // SAFETY: MyLatch is this process's latch.
    unsafe {
        pg_sys::WaitLatch(
            pg_sys::MyLatch,
            (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
            timeout.as_millis() as std::ffi::c_long,
            pg_sys::PG_WAIT_EXTENSION,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
    }
}

//! Stopping a model call from outside it. A host calls its caller's `between` callback before every model run and
//! between tokenizer chunks (64 inputs or 64 kB); a callback that finds its call cancelled calls [`stop`], which unwinds out of the
//! host to the nearest [`cancellable`], where it becomes [`ModelError::Cancelled`]. The shared inference worker
//! does this with a [`CancelFlag`] in the request's shared memory, which the backend sets when its statement is
//! cancelled or times out, so the runner is free again within one model run or one input's tokenization.
//! (A backend's own host needs none of this: Postgres' query cancel unwinds through its callback already.)
//!
//! Unwinding leaves a host usable: `between` is never called while a session runs or a tokenizer holds state.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, Ordering};

use super::error::{ModelError, Result};

/// The unwind payload of [`stop`].
struct Cancelled;

/// Stops the model call this is called in (from a `between` callback), without running the panic hook.
pub fn stop() -> ! {
    resume_unwind(Box::new(Cancelled))
}

/// Runs `f`; a [`stop`] inside it gives `Err(ModelError::Cancelled)`. Any other panic goes on unwinding.
pub fn cancellable<R>(f: impl FnOnce() -> Result<R>) -> Result<R> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) if payload.is::<Cancelled>() => Err(ModelError::Cancelled),
        Err(payload) => resume_unwind(payload),
    }
}

/// A request's cancel flag: a word another thread or process (through shared memory) sets once.
#[derive(Clone, Copy)]
pub struct CancelFlag<'a>(&'a AtomicU32);

impl<'a> CancelFlag<'a> {
    pub const fn new(word: &'a AtomicU32) -> Self {
        CancelFlag(word)
    }

    /// # Safety
    /// `word` points to a 4-byte aligned u32 that stays mapped for `'a` and is only ever accessed atomically.
    pub unsafe fn from_ptr(word: *const u32) -> Self {
        // SAFETY: the caller's promise; AtomicU32 has the layout of u32.
        CancelFlag(unsafe { AtomicU32::from_ptr(word.cast_mut()) })
    }

    pub fn set(&self) {
        self.0.store(1, Ordering::Release);
    }

    pub fn clear(&self) {
        self.0.store(0, Ordering::Release);
    }

    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire) != 0
    }

    /// [`stop`]s the call when the flag is set: what a `between` callback calls.
    pub fn check(&self) {
        if self.is_set() {
            stop()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_flag_stops_the_call_at_its_next_check() {
        let word = AtomicU32::new(0);
        let flag = CancelFlag::new(&word);
        let mut checks = 0;
        let result: Result<usize> = cancellable(|| {
            for i in 0..1000 {
                checks += 1;
                flag.check();
                if i == 9 {
                    flag.set(); // set from "outside" after the tenth check
                }
            }
            Ok(checks)
        });
        assert_eq!(result, Err(ModelError::Cancelled));
        assert_eq!(checks, 11, "stopped at the first check after the flag was set");
        flag.clear();
        assert_eq!(cancellable(|| Ok(flag.is_set())), Ok(false));
    }

    #[test]
    fn other_panics_are_not_cancellations() {
        let caught = catch_unwind(|| cancellable::<()>(|| panic!("a real bug")));
        assert!(caught.is_err(), "a panic that is not a cancellation keeps unwinding");
        assert_eq!(
            cancellable(|| Err::<(), _>(ModelError::InvalidName { name: "x".into() })),
            Err(ModelError::InvalidName { name: "x".into() })
        );
    }

    #[test]
    fn a_flag_in_foreign_memory_is_seen_across_threads() {
        let mut shared = Box::new([0u32; 4]);
        let ptr = &raw mut shared[2];
        // SAFETY: aligned, lives for the test, accessed only through CancelFlag.
        let flag = unsafe { CancelFlag::from_ptr(ptr) };
        let addr = ptr as usize;
        std::thread::spawn(move || {
            // SAFETY: as above.
            unsafe { CancelFlag::from_ptr(addr as *const u32) }.set()
        })
        .join()
        .unwrap();
        assert!(flag.is_set());
        assert_eq!(
            cancellable(|| {
                flag.check();
                Ok(())
            }),
            Err(ModelError::Cancelled)
        );
    }
}

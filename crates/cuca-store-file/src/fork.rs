//! Which side of a `fork(2)` this process is on, known without a system call per append.
//!
//! A forked child shares its parent's open files and their `flock` locks, so an append
//! handle must refuse appends in a process other than the one that opened it
//! ([`crate::FileBackend`]'s docs). Asking the kernel for the process id on every append
//! (`getpid`, a real system call since glibc stopped caching it) was about a tenth of an
//! append's cost (docs/performance.md). Instead, a `pthread_atfork` child handler counts
//! generations: the child of a `fork` (through libc, as `std::process::Command` and every
//! other user-space fork goes) starts one generation past its parent, and a handle compares
//! the generation it was opened in with the current one, an atomic load.
//!
//! This is the crate's only `unsafe`: one foreign call, made once, registering a handler that
//! does one atomic add (async-signal-safe, as a handler run inside `fork` must be).
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Once;

static GENERATION: AtomicU64 = AtomicU64::new(0);
static WATCH: Once = Once::new();
/// `pthread_atfork` failed, and [`generation`] reads the process id instead.
static FALLBACK: AtomicBool = AtomicBool::new(false);

extern "C" fn forked_child() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// This process's fork generation: the same value in one process for as long as it lives,
/// a different one in each child it forks from then on.
pub(crate) fn generation() -> u64 {
    WATCH.call_once(|| {
        // SAFETY: `pthread_atfork` only records the three function pointers; the one given
        // is an `extern "C"` function with no arguments that never unwinds and only does an
        // atomic add, which is allowed in a child after `fork` of a threaded process. A
        // failure (ENOMEM) leaves forks uncounted, so it falls back to the process id.
        let registered = unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
        if registered != 0 {
            FALLBACK.store(true, Ordering::Relaxed);
        }
    });
    if FALLBACK.load(Ordering::Relaxed) {
        // No handler: the process id tells processes apart, at a system call each time.
        return u64::from(std::process::id()) | 1 << 63;
    }
    GENERATION.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "After `fork(2)` without exec, a child shares the parent's lock": the child of a real
    /// fork is in another generation, and the parent stays in its own.
    #[test]
    fn a_forked_child_is_in_another_generation_and_the_parent_stays_in_its_own() {
        let parent = generation();
        // SAFETY: the child only loads atomics (`generation` has already registered, so its
        // `Once` is a load too) and calls `_exit`, all async-signal-safe.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let code = if generation() == parent { 1 } else { 0 };
            unsafe { libc::_exit(code) };
        }
        assert!(pid > 0, "fork failed: {}", std::io::Error::last_os_error());
        let mut status = 0;
        // SAFETY: waits for the child this test made, into a local.
        let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(waited, pid);
        assert!(libc::WIFEXITED(status), "child status {status}");
        assert_eq!(
            libc::WEXITSTATUS(status),
            0,
            "the child saw its parent's generation"
        );
        assert_eq!(generation(), parent);
    }
}

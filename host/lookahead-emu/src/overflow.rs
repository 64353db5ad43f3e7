//! The report of an emulated GPU thread that overflows its stack. Each thread runs on a
//! coroutine stack whose lowest page is a guard page; touching the guard page raises SIGSEGV, which
//! would end the process with no message. This handler recognises a fault in the running
//! coroutine's guard page, prints which kernel, block and thread overflowed and what to do,
//! and ends the process (a stack overflow cannot be unwound). Other faults go to the handler
//! that was there before (Rust's own, which reports overflows of ordinary threads).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};

use crate::thread::overflow_context;

/// How far below a stack's guard page a fault still counts as its overflow: a margin for a
/// frame that jumps past the page before touching it.
const GUARD_SLACK: usize = 64 * 1024;

/// The page size (the guard page's length), read once when the handler is installed.
static PAGE: AtomicUsize = AtomicUsize::new(4096);

static PREVIOUS_SEGV: OnceLock<libc::sigaction> = OnceLock::new();
static PREVIOUS_BUS: OnceLock<libc::sigaction> = OnceLock::new();

/// Installs the handler once per process (before the first launch).
pub(crate) fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `sysconf` has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if page > 0 {
            PAGE.store(page as usize, Ordering::Relaxed);
        }
        for (sig, previous) in [
            (libc::SIGSEGV, &PREVIOUS_SEGV),
            (libc::SIGBUS, &PREVIOUS_BUS),
        ] {
            // SAFETY: a zeroed `sigaction` is a valid value to fill in; `sigaction` reads
            // `action` and writes `old`, both valid for the call.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = handler as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &action, &mut old) == 0 {
                    let _ = previous.set(old);
                }
            }
        }
    });
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid `siginfo_t` to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let (limit, thread) = overflow_context();
    // The guard page is the stack's lowest page, starting at its limit.
    let guard_end = limit + PAGE.load(Ordering::Relaxed);
    if limit != 0
        && !thread.is_null()
        && addr < guard_end
        && addr >= limit.saturating_sub(GUARD_SLACK)
    {
        // SAFETY: the scheduler sets the pointer only while the thread's context is alive.
        report(unsafe { &*thread });
    }
    let previous = if sig == libc::SIGBUS {
        PREVIOUS_BUS.get()
    } else {
        PREVIOUS_SEGV.get()
    };
    // SAFETY: hands the signal to the handler installed before ours, as it expects it.
    unsafe { chain(sig, info, ctx, previous) }
}

/// Calls the previous handler, or restores the default action so the fault, repeated on
/// return, ends the process as it would have.
unsafe fn chain(
    sig: libc::c_int,
    info: *mut libc::siginfo_t,
    ctx: *mut libc::c_void,
    previous: Option<&libc::sigaction>,
) {
    match previous {
        Some(p) if p.sa_sigaction != libc::SIG_DFL && p.sa_sigaction != libc::SIG_IGN => {
            if p.sa_flags & libc::SA_SIGINFO != 0 {
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    std::mem::transmute(p.sa_sigaction);
                f(sig, info, ctx);
            } else {
                let f: extern "C" fn(libc::c_int) = std::mem::transmute(p.sa_sigaction);
                f(sig);
            }
        }
        _ => {
            let mut default: libc::sigaction = std::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &default, std::ptr::null_mut());
        }
    }
}

/// Writes the report to standard error and aborts. Runs in a signal handler: it formats into
/// a fixed buffer (no allocation, no lock) and writes with one `write(2)`.
fn report(t: &crate::thread::ThreadCtx<'_>) -> ! {
    let launch = t.block.launch;
    let mut buf = FixedBuf::default();
    let _ = writeln!(
        buf,
        "lookahead emulator: kernel `{}` overflowed the stack of block {:?}, thread {:?}: an \
         emulated GPU thread has {} KiB of stack (`Emulator::stack_size`). A large local \
         array? On the GPU a thread's local memory is at most 512 KiB; keep large data in a \
         slice the host passes, or in shared memory.",
        launch.kernel,
        t.block.block_idx,
        t.thread_idx,
        launch.stack_size / 1024
    );
    // SAFETY: writes the buffer's initialised bytes to standard error.
    unsafe {
        libc::write(2, buf.bytes.as_ptr().cast(), buf.len);
        libc::abort()
    }
}

/// A `fmt::Write` into a fixed array, truncating what does not fit.
struct FixedBuf {
    bytes: [u8; 640],
    len: usize,
}

impl Default for FixedBuf {
    fn default() -> Self {
        FixedBuf {
            bytes: [0; 640],
            len: 0,
        }
    }
}

impl std::fmt::Write for FixedBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let n = s.len().min(self.bytes.len() - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

//! The report of an emulated GPU thread that faults: it overflows its stack, or an `unsafe`
//! access (`get_unchecked`, a raw pointer) reaches memory it does not own. Each thread runs on
//! a coroutine stack whose lowest page is a guard page; either fault raises SIGSEGV (or
//! SIGBUS), which would end the process with no message. This handler, for a fault while an
//! emulated thread runs, prints which kernel, block and thread faulted, at what address, and
//! what to do, and ends the process (a fault cannot be unwound). Faults outside a launch go to
//! the handler that was there before (Rust's own, which reports overflows of ordinary
//! threads).

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
        name_the_thread_of_aborting_panics();
    });
}

/// A debug build checks `unsafe` preconditions (`get_unchecked`'s index, say) with a panic
/// that cannot unwind: the process aborts after the panic hook, before the emulator could
/// report it. This hook (after the one that was there) adds the kernel, block and thread.
fn name_the_thread_of_aborting_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info);
        let message = (info.payload().downcast_ref::<&str>().copied())
            .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
            .unwrap_or("");
        let aborts = message.starts_with("unsafe precondition")
            || message.contains("cannot unwind")
            || message.contains("does not allow unwinding");
        if !aborts {
            return;
        }
        crate::thread::with_current(|t| {
            eprintln!(
                "lookahead emulator: the failed check above is in kernel `{}`, block {:?}, \
                 thread {:?}: an `unsafe` access out of its bounds? Index with `x[i]` to get \
                 a report with the index and the length.",
                t.block.launch.kernel, t.block.block_idx, t.thread_idx
            )
        });
    }));
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid `siginfo_t` to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let (limit, thread) = overflow_context();
    // The guard page is the stack's lowest page, starting at its limit.
    let guard_end = limit + PAGE.load(Ordering::Relaxed);
    if !thread.is_null() {
        let overflow = limit != 0 && addr < guard_end && addr >= limit.saturating_sub(GUARD_SLACK);
        let fault = if overflow {
            Fault::StackOverflow
        } else {
            Fault::BadAddress(addr)
        };
        // SAFETY: the scheduler sets the pointer only while the thread's context is alive.
        report(unsafe { &*thread }, fault);
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

/// What an emulated thread did.
enum Fault {
    StackOverflow,
    /// A load or store at this address faulted.
    BadAddress(usize),
}

/// Writes the report to standard error and aborts. Runs in a signal handler: it formats into
/// a fixed buffer (no allocation, no lock) and writes with one `write(2)`.
fn report(t: &crate::thread::ThreadCtx<'_>, fault: Fault) -> ! {
    let launch = t.block.launch;
    let mut buf = FixedBuf::default();
    let (kernel, block, thread) = (launch.kernel, t.block.block_idx, t.thread_idx);
    let _ = match fault {
        Fault::StackOverflow => writeln!(
            buf,
            "lookahead emulator: kernel `{kernel}` overflowed the stack of block {block:?}, \
             thread {thread:?}: an emulated GPU thread has {} KiB of stack \
             (`Emulator::stack_size`). A large local array? On the GPU a thread's local memory \
             is at most 512 KiB; keep large data in a slice the host passes, or in shared \
             memory.",
            launch.stack_size / 1024
        ),
        Fault::BadAddress(addr) => writeln!(
            buf,
            "lookahead emulator: kernel `{kernel}` accessed memory it does not own ({}) in \
             block {block:?}, thread {thread:?}: an out-of-bounds or dangling \
             access in `unsafe` code (`get_unchecked`, a raw pointer). On the GPU this is an \
             illegal address error, or silent corruption. Index with `x[i]` to get the index \
             and the length in a report, or check the unsafe code's bounds.",
            // The CPU gives no address for one outside the address space's canonical half.
            Address(addr)
        ),
    };
    // SAFETY: writes the buffer's initialised bytes to standard error.
    unsafe {
        libc::write(2, buf.bytes.as_ptr().cast(), buf.len);
        libc::abort()
    }
}

/// A faulting address as the report shows it.
struct Address(usize);

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            0 => f.write_str("an address outside the process's address space"),
            a => write!(f, "address {a:#x}"),
        }
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

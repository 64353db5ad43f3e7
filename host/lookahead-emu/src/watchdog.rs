//! The process-wide watchdog. A block whose threads spin through ordered loads, atomics or
//! `nanosleep` is reported as hanging by those hooks ([`crate::EmuError::Hang`]); a thread
//! that loops without calling anything the emulator sees cannot be interrupted, so this
//! thread ends the process with a message naming the kernel, the block and the thread when a
//! launch has made no progress at all for its watchdog time.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once, Weak};
use std::time::{Duration, Instant};

use crate::thread::LaunchCtx;

/// What one host thread of a launch is running: the block (linear index + 1; 0 = none) and
/// the thread (linear index) it resumed last. Written by that host thread alone.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct WorkerSlot {
    pub block: AtomicU64,
    pub thread: AtomicU32,
}

/// The launches being watched.
static ACTIVE: Mutex<Vec<Weak<LaunchCtx>>> = Mutex::new(Vec::new());

/// A launch under watch until this is dropped.
pub(crate) struct Watched(Arc<LaunchCtx>);

impl Drop for Watched {
    fn drop(&mut self) {
        let mut active = ACTIVE.lock().unwrap_or_else(|p| p.into_inner());
        active.retain(|w| w.upgrade().is_some_and(|l| !Arc::ptr_eq(&l, &self.0)));
    }
}

/// Watches `launch` until the returned guard is dropped.
pub(crate) fn watch(launch: &Arc<LaunchCtx>) -> Watched {
    static START: Once = Once::new();
    START.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("lookahead-emu-watchdog".into())
            .spawn(run);
        // Without the thread, launches still report spin-waits through the hooks.
        drop(spawned);
    });
    ACTIVE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(Arc::downgrade(launch));
    Watched(launch.clone())
}

/// Checks every watched launch's progress count once a second.
fn run() {
    // (launch, its count when last seen, since when it has not changed)
    let mut seen: Vec<(Weak<LaunchCtx>, u64, Instant)> = Vec::new();
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let active: Vec<Arc<LaunchCtx>> = (ACTIVE.lock().unwrap_or_else(|p| p.into_inner()))
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        seen.retain(|(w, _, _)| {
            w.upgrade()
                .is_some_and(|l| active.iter().any(|a| Arc::ptr_eq(a, &l)))
        });
        for launch in active {
            let count = launch.progress.load(Ordering::Relaxed);
            let entry = seen
                .iter_mut()
                .find(|(w, _, _)| w.as_ptr() == Arc::as_ptr(&launch));
            match entry {
                Some((_, last, since)) if *last == count => {
                    if since.elapsed() >= launch.watchdog + Duration::from_secs(1) {
                        end_process(&launch, since.elapsed());
                    }
                }
                Some(e) => {
                    e.1 = count;
                    e.2 = Instant::now();
                }
                None => seen.push((Arc::downgrade(&launch), count, Instant::now())),
            }
        }
    }
}

/// The message for a launch that stopped making progress, then the end of the process: the
/// looping thread cannot be stopped, and returning would leave it running forever.
fn end_process(launch: &LaunchCtx, idle: Duration) -> ! {
    let (gx, gy) = (launch.grid_dim[0] as u64, launch.grid_dim[1] as u64);
    let running: Vec<String> = (launch.slots.iter())
        .filter_map(|s| {
            let b = s.block.load(Ordering::Relaxed).checked_sub(1)?;
            let t = s.thread.load(Ordering::Relaxed);
            let d = launch.block_dim;
            let block = [b % gx, b / gx % gy, b / (gx * gy)];
            let thread = [t % d[0], t / d[0] % d[1], t / (d[0] * d[1])];
            Some(format!("block {block:?} thread {thread:?}"))
        })
        .collect();
    eprintln!(
        "lookahead emulator: kernel `{}` hangs: for {:.0} s nothing in it progressed, and the \
         running thread calls no device function the emulator could stop it in (a loop that \
         never ends, or a spin on a plain load?). Running: {}. Ending the process (watchdog: \
         `Emulator::watchdog`, LOOKAHEAD_EMU_WATCHDOG_S).",
        launch.kernel,
        idle.as_secs_f64(),
        if running.is_empty() {
            "unknown".to_string()
        } else {
            running.join(", ")
        }
    );
    std::process::abort()
}

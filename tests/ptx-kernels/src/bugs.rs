//! Kernels with deliberate bugs, for the emulator's reports (`tests/tests/emulator.rs`), and
//! their correct counterparts.

use lookahead_device::memory;
use lookahead_device::prelude::*;

/// Threads 40 and up return before a barrier the others wait at: a GPU block would hang.
#[kernel]
pub fn bug_barrier_after_return(out: &mut [u32]) {
    let t = thread_idx_x();
    if t as usize >= out.len() {
        return;
    }
    sync_threads();
    out[t as usize] = t;
}

/// Only half the warp reaches a full-mask shuffle.
#[kernel]
pub fn bug_divergent_shuffle(out: &mut [f32]) {
    let l = lane_id();
    if l < 16 {
        out[l as usize] = warp::shfl_down_f32(l as f32, 1);
    }
}

/// Writes a shared-memory element, passes `warp::sync`, and reads a neighbour's: the next
/// lane's of the same warp (ordered by the warp barrier), or with `across` set the same
/// lane's of the other warp of a 64-thread block (not ordered: a data race).
#[kernel(same_len(x, y))]
pub fn warp_synced_neighbour(x: &[f32], y: &mut [f32], across: u32) {
    let tile = shared_array!(f32; 64);
    let t = thread_idx_x() as usize % 64;
    let i = global_index_x();
    tile.set(t, if i < x.len() { x[i] } else { 0.0 });
    warp::sync();
    let from = if across != 0 {
        (t + 32) % 64
    } else {
        (t & !31) | ((t + 1) & 31)
    };
    let v = tile.get(from);
    if i < y.len() {
        y[i] = v;
    }
}

/// Reads a neighbour's shared-memory element with no barrier after the writes.
#[kernel(same_len(x, y))]
pub fn bug_missing_barrier(x: &[f32], y: &mut [f32]) {
    let tile = shared_array!(f32; 64);
    let t = thread_idx_x() as usize % 64;
    let i = global_index_x();
    tile.set(t, if i < x.len() { x[i] } else { 0.0 });
    // Missing: sync_threads();
    let left = tile.get((t + 63) % 64);
    if i < y.len() {
        y[i] = left;
    }
}

/// Thread 0 spins until thread 1 of its block sets `flag[0]`: fine on a GPU, whose threads
/// run concurrently; the emulator must let thread 1 run while thread 0 spins.
#[kernel(min_len(flag = 1))]
pub fn spin_on_a_sibling(flag: &mut [u32], out: &mut [u32]) {
    let p = flag.as_mut_ptr();
    match thread_idx_x() {
        // SAFETY: `p` is `flag[0]`, aligned (`min_len(flag = 1)`).
        0 => unsafe {
            while memory::load_acquire_gpu(p) == 0 {}
            if !out.is_empty() {
                out[0] = memory::load_acquire_gpu(p);
            }
        },
        // SAFETY: as above.
        1 => unsafe { memory::store_release_system(p, 7) },
        _ => {}
    }
}

/// Waits for a flag nothing sets: hangs on a GPU.
#[kernel(min_len(flag = 1))]
pub fn bug_spin_forever(flag: &mut [u32]) {
    let p = flag.as_mut_ptr();
    if thread_idx_x() == 0 {
        // SAFETY: `p` is `flag[0]`.
        while unsafe { memory::load_acquire_gpu(p) } != 2 {}
    }
}

/// A loop that never ends and calls nothing (with `n == u32::MAX`): hangs on a GPU.
#[kernel(min_len(out = 1))]
pub fn bug_endless_loop(n: u32, out: &mut [u32]) {
    let mut i = 0u32;
    let mut acc = 0u32;
    while i < n || n == u32::MAX {
        acc = acc.wrapping_mul(31).wrapping_add(i);
        i = i.wrapping_add(1);
    }
    out[0] = acc;
}

/// Every thread adds to `y[0]` without an atomic: on a GPU the updates race.
#[kernel(min_len(y = 1))]
pub fn bug_racy_sum(y: &mut [f32]) {
    y[0] += 1.0;
}

/// The same sum with an atomic: no race.
#[kernel(min_len(y = 1))]
pub fn atomic_sum(y: &mut [f32]) {
    atomic_add(&mut y[0], 1.0);
}

/// Even threads wait at one `sync_threads()`, odd threads at another: undefined in CUDA.
#[kernel]
pub fn bug_divergent_barrier(out: &mut [u32]) {
    let t = thread_idx_x() as usize;
    if t % 2 == 0 {
        sync_threads();
    } else {
        sync_threads();
    }
    if t < out.len() {
        out[t] = 1;
    }
}

/// Reads a shared flag no thread wrote: garbage on a GPU.
#[kernel]
pub fn bug_uninitialised_shared(out: &mut [u32]) {
    let flags = shared_array!(bool; 64);
    let t = thread_idx_x() as usize % 64;
    if t != 5 {
        flags.set(t, true);
    }
    sync_threads();
    if t < out.len() {
        out[t] = flags.get((t + 1) % 64) as u32;
    }
}

/// A 400 KB local array per thread (a GPU thread may have up to 512 KiB of local memory).
#[kernel]
pub fn large_local_array(out: &mut [u32]) {
    let mut local = [0u32; 100_000];
    let t = thread_idx_x() as usize;
    for (k, v) in local.iter_mut().enumerate().step_by(997) {
        *v = (k + t) as u32;
    }
    let pick = core::hint::black_box(t * 997 % 100_000);
    if t < out.len() {
        out[t] = local[pick];
    }
}

/// Reads `x` at element `far` without a bounds check (a bug when `far` is past the end): the
/// emulator names the kernel, block and thread of the fault instead of dying silently.
#[kernel(min_len(out = 1))]
pub fn bug_unchecked_read(x: &[f32], far: u64, out: &mut [f32]) {
    if global_index_x() == 0 {
        // SAFETY: none; the host picks `far` past the end on purpose.
        out[0] = unsafe { *x.get_unchecked(far as usize) };
    }
}

/// As [`bug_unchecked_read`], through a raw pointer (no debug check: the read itself faults).
#[kernel(min_len(out = 1))]
pub fn bug_raw_pointer_read(x: &[f32], far: u64, out: &mut [f32]) {
    if global_index_x() == 0 {
        // SAFETY: none; the host picks `far` past the end on purpose.
        out[0] = unsafe { x.as_ptr().wrapping_add(far as usize).read_volatile() };
    }
}

// Kernels in Rust-CUDA's style type-check on the host, where #[kernel] keeps the function.
use core::sync::atomic::Ordering;
use cuda_std::atomic::AtomicF32;
use cuda_std::prelude::*;
use cuda_std::shared_array;

#[derive(Clone, Copy)]
#[repr(C)]
pub struct Scale {
    pub factor: f32,
}

#[kernel]
#[allow(improper_ctypes_definitions)]
pub unsafe fn scale(x: &[f32], y: &mut [f32], s: Scale) {
    let i = thread::index_1d() as usize;
    if i < x.len() {
        y[i] = x[i] * s.factor;
    }
}

#[kernel]
pub unsafe fn tile_sum(out: *mut f32) {
    let tile = shared_array![f32; 64];
    *tile = 1.0;
    thread::sync_threads();
    (*(out as *const AtomicF32)).fetch_add(*tile, Ordering::Relaxed);
}

fn main() {
    // On the host the float atomics work on the same bits.
    let total = AtomicF32::new(1.5);
    assert_eq!(total.fetch_add(2.0, Ordering::Relaxed), 1.5);
    assert_eq!(total.load(Ordering::Relaxed), 3.5);
    assert_eq!(cuda_std::cfg::ComputeCapability::from_cuda_arch(b"900"), Some(cuda_std::cfg::ComputeCapability::Compute90));
}

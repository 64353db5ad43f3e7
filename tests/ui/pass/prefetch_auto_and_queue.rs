//! `level = auto` kernels (two entries, `launch`, `launch_variant`, `auto_choice`), request
//! queues on managed memory, and `of(...)` targets that are expressions of the loop variable.
use cudarc::driver::{CudaSlice, UnifiedSlice};
use lookahead::launch::autotune::{Level, Variant};
use lookahead::launch::LaunchConfig;
use lookahead_device::kernel;
use lookahead_device::prelude::*;
use lookahead_device::uvm::requests::RequestQueue;

static PTX: &[(u32, &str)] = &[];

#[kernel(ptx = PTX, min_len(out = 1))]
pub fn auto_sum(x: &[f32], out: &mut [f32]) {
    let mut acc = 0.0;
    #[prefetch_next(level = auto, distance = 4)]
    for i in (global_index_x()..x.len()).step_by(grid_stride_x()) {
        acc += x[i];
    }
    // A second auto loop (its own levels and distances), and a fixed one: all in the same
    // entries, one per level either auto loop lists.
    #[prefetch_next(level = auto(l2, bulk), distance = auto(1, 3))]
    for v in x.iter() {
        acc += *v;
    }
    #[prefetch_next(level = l1)]
    for i in 0..x.len() {
        acc -= x[i];
    }
    atomic_add(&mut out[0], acc);
}

#[kernel(ptx = PTX, same_len(sums, weights))]
pub fn queued(
    lists: ManagedSlice<f32>,
    offsets: &[u32],
    weights: &[f32],
    sums: &mut [f32],
    q: RequestQueue,
) {
    #[prefetch_next(distance = 2, queue = q, of(lists.part(offsets[l] as usize..offsets[l + 1] as usize), weights))]
    for l in 0..sums.len() {
        let mut acc = 0.0;
        for v in &lists[offsets[l] as usize..offsets[l + 1] as usize] {
            acc += *v;
        }
        sums[l] = acc * weights[l];
    }
    #[prefetch_next(distance = 1, queue = q, level = auto)]
    for c in lists.chunks_exact(64) {
        sums[0] += c[0];
    }
}

#[kernel(ptx = PTX, same_len(idx, out))]
pub fn gather(src: &[f32], idx: &[u32], out: &mut [f32]) {
    #[prefetch_next(distance = 8, of(src.at(idx[i] as usize)))]
    for i in 0..out.len() {
        out[i] = src[idx[i] as usize];
    }
}

fn launch_all(gpu: &lookahead::Gpu) -> lookahead::Result<()> {
    let s = gpu.stream();
    let x: CudaSlice<f32> = s.clone_htod(&[1.0f32; 8]).unwrap();
    let mut out: CudaSlice<f32> = s.clone_htod(&[0.0f32]).unwrap();
    let cfg = LaunchConfig::for_len(8, 32);
    auto_sum::launch(gpu, cfg, &x, &mut out)?;
    auto_sum::launch_variant(Variant::new(Level::Bulk, 3), s, cfg, &x, &mut out)?;
    auto_sum::launch_variant(auto_sum::Variant::PLAIN, gpu, cfg, &x, &mut out)?;
    let _: Option<Variant> = auto_sum::auto_choice(gpu);
    assert_eq!(auto_sum::ENTRIES[3], (Some(Level::Bulk), "auto_sum__bulk"));
    assert_eq!(auto_sum::CANDIDATES.len(), 1 + 3 * 2);
    // SAFETY: f32 accepts any bits.
    let lists: UnifiedSlice<f32> = unsafe { gpu.context().alloc_unified(64, true) }.unwrap();
    let offsets: CudaSlice<u32> = s.clone_htod(&[0u32, 64]).unwrap();
    let weights: CudaSlice<f32> = s.clone_htod(&[1.0f32]).unwrap();
    let mut sums: CudaSlice<f32> = s.clone_htod(&[0.0f32]).unwrap();
    queued::launch(
        gpu,
        cfg,
        &lists,
        &offsets,
        &weights,
        &mut sums,
        RequestQueue::disabled(),
    )?;
    let emu = lookahead::emu::Emulator::new();
    let (src, idx, mut got) = (vec![1.0f32; 4], vec![3u32, 0], vec![0.0f32; 2]);
    gather::launch(&emu, LaunchConfig::for_len(2, 2), &src, &idx, &mut got)?;
    Ok(())
}

fn main() {
    if let Ok(gpu) = lookahead::Gpu::new(0) {
        launch_all(&gpu).unwrap();
    }
}

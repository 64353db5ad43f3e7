//! Every accepted parameter kind, every #[prefetch_next] form, and the typed launchers.
use cudarc::driver::{CudaSlice, UnifiedSlice};
use lookahead::launch::LaunchConfig;
use lookahead_device::prelude::*;
use lookahead_device::{device_fn, kernel};

static PTX: &[(u32, &str)] = &[];

#[kernel(same_len(x, y), min_len(x = 1))]
pub fn scalars_and_slices(
    a: f32, b: f64, c: i8, d: i16, e: i32, f: i64, g: isize, h: u8, i: u16, j: u32, k: u64, l: usize,
    x: &[f32], y: &mut [f32],
) {
    let _ = (a, b, c, d, e, f, g, h, i, j, k, l);
    let t = global_index_x();
    if t < y.len() {
        y[t] = x[t];
    }
}

#[kernel]
pub fn views(a: DeviceSlice<u32>, b: DeviceSliceMut<u32>, c: ManagedSlice<f64>, d: ManagedSliceMut<f64>) {
    let (mut b, mut d) = (b, d);
    b[0] = a[0];
    d[0] = c[0];
}

#[device_fn]
fn dot(x: &[f32], y: &[f32]) -> f32 {
    let mut acc = 0.0;
    #[prefetch_next(distance = 4, level = l2_evict_last, portable)]
    for i in 0..x.len() {
        acc += x[i] * y[i];
    }
    acc
}

#[kernel(min_len(out = 1))]
pub fn prefetch_forms(x: &[f32], y: &mut [f32], out: &mut [f32]) {
    #[prefetch_next(distance = 2, level = l1)]
    for i in 0..x.len() {
        y[i] = x[i];
    }
    #[prefetch_next(level = l2, of(x))]
    for i in (global_index_x()..=x.len() - 1).step_by(grid_stride_x()) {
        out[0] += x[i];
    }
    #[prefetch_next(distance = 8)]
    for v in y.iter_mut() {
        *v += 1.0;
    }
    #[prefetch_next(level = bulk, portable)]
    for c in x.chunks(256) {
        out[0] += c[0];
    }
    #[prefetch_next(level = l2_evict_normal, portable)]
    'outer: for c in y.chunks_exact_mut(16) {
        c[0] = 0.0;
        continue 'outer;
    }
    let tile = shared_array!(f32; 64);
    tile.set(0, dot(x, y));
    out[0] += tile.get(0);
}

fn launch_all(gpu: &lookahead::Gpu) -> lookahead::Result<()> {
    let s = gpu.stream();
    let x: CudaSlice<f32> = s.clone_htod(&[1.0f32; 8]).unwrap();
    let mut y: CudaSlice<f32> = s.clone_htod(&[0.0f32; 8]).unwrap();
    let cfg = LaunchConfig::for_len(8, 32);
    scalars_and_slices::launch(gpu, cfg, 1.0, 2.0, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, &x, &mut y)?;
    let mut out: CudaSlice<f32> = s.clone_htod(&[0.0f32]).unwrap();
    prefetch_forms::launch(s, cfg, &x.slice(0..4), &mut y, &mut out)?;
    let a: CudaSlice<u32> = s.clone_htod(&[1u32]).unwrap();
    let mut b: CudaSlice<u32> = s.clone_htod(&[0u32]).unwrap();
    // SAFETY: f64 accepts any bits.
    let c: UnifiedSlice<f64> = unsafe { gpu.context().alloc_unified(1, true) }.unwrap();
    let mut d: UnifiedSlice<f64> = unsafe { gpu.context().alloc_unified(1, true) }.unwrap();
    views::launch(gpu, cudarc::driver::LaunchConfig::for_num_elems(1), &a, &mut b, &c, &mut d)?;
    assert_eq!(views::NAME, "views");
    Ok(())
}

fn main() {
    if let Ok(gpu) = lookahead::Gpu::new(0) {
        launch_all(&gpu).unwrap();
    }
}

/// The user's own types: a slice of a DeviceCopy struct, one by value, a KernelParams bundle.
mod user_types {
    use lookahead_device::prelude::*;

    #[derive(Clone, Copy, DeviceCopy)]
    #[repr(C)]
    pub struct Node {
        pub next: u32,
        pub value: f32,
    }

    #[derive(KernelParams)]
    #[repr(C)]
    pub struct Io {
        pub input: DeviceSlice<Node>,
        pub output: ManagedSliceMut<f32>,
        pub scale: f32,
        pub _pad: u32,
    }

    #[kernel]
    pub fn walk(nodes: &[Node], first: Node, mut io: Io) {
        let i = global_index_x();
        if i < io.output.len() {
            io.output[i] = (nodes[i].value + first.value + io.input[i].value) * io.scale;
        }
    }

    /// Parameter names the launcher uses for itself, and nothing clashes.
    #[kernel]
    pub fn names(cfg: u32, on: u32, args: &[f32], params: &mut [f32], prepared: u32, entry: u32) {
        params[0] = args[0] + (cfg + on + prepared + entry) as f32;
    }

    pub fn launch(gpu: &lookahead::Gpu) -> lookahead::Result<()> {
        let s = gpu.stream();
        let nodes = s.clone_htod(&[Node { next: 0, value: 1.0 }]).unwrap();
        let mut out = lookahead::ManagedBuffer::<f32>::zeroed(gpu, 1)?;
        let io = IoArgs {
            input: &nodes,
            output: &mut out,
            scale: 2.0,
            _pad: 0,
        };
        let cfg = lookahead::launch::LaunchConfig::for_len(1, 32);
        walk::launch(gpu, cfg, &nodes, Node { next: 0, value: 2.0 }, io)?;
        let x = s.clone_htod(&[1.0f32]).unwrap();
        let mut y = s.clone_htod(&[0.0f32]).unwrap();
        names::launch(gpu, cfg, 1, 2, &x, &mut y, 3, 4)
    }
}

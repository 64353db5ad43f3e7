//! On the GPU: `lookahead::graph` captures typed launches into a CUDA graph, replays them,
//! and updates their arguments and grid without capturing again; misuse is an error.
//!
//! `cargo test -p lookahead-tests --test gpu_graph -- --ignored` (on a machine with a CUDA
//! GPU; these tests FAIL, not pass, when no GPU is found).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use lookahead::graph::Graph;
use lookahead::launch::LaunchConfig;
use lookahead::untracked::{
    Untracked as U, UntrackedManaged, UntrackedManagedMut, UntrackedMut as UM,
};
use lookahead::ManagedBuffer;
use lookahead::{Error, Gpu, Result};
use lookahead_tests::input;

const N: usize = (1 << 18) + 37;

fn gpu() -> Gpu {
    Gpu::new(0).unwrap_or_else(|e| panic!("these tests need a CUDA GPU: {e}"))
}

/// `y[..n] += a * x[..n]` as a typed, untracked launch on `s`.
fn saxpy(
    s: &Arc<CudaStream>,
    a: f32,
    n: usize,
    x: &CudaSlice<f32>,
    y: &mut CudaSlice<f32>,
) -> Result<()> {
    let cfg = LaunchConfig::for_len(n, demo_kernels::BLOCK_SIZE);
    demo_kernels::saxpy::launch(s, cfg, a, &U::prefix(x, n, s)?, &mut UM::prefix(y, n, s)?)
}

struct Fixture {
    s: Arc<CudaStream>,
    x: Vec<f32>,
    y0: Vec<f32>,
    dx: CudaSlice<f32>,
    dy: CudaSlice<f32>,
}

fn fixture(gpu: &Gpu) -> Fixture {
    let s = gpu.context().new_stream().unwrap();
    let (x, y0) = (input(1, N), input(2, N));
    let (dx, dy) = (s.clone_htod(&x).unwrap(), s.clone_htod(&y0).unwrap());
    Fixture { s, x, y0, dx, dy }
}

fn read(f: &Fixture) -> Vec<f32> {
    f.s.synchronize().unwrap();
    f.s.clone_dtoh(&f.dy).unwrap()
}

/// `y0 + a * x` on the first `n` elements, `y0` after.
fn expected(f: &Fixture, a: f32, n: usize) -> Vec<f32> {
    (0..N)
        .map(|i| if i < n { f.y0[i] + a * f.x[i] } else { f.y0[i] })
        .collect()
}

fn assert_close(got: &[f32], want: &[f32]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "element {i}: {g} vs {w}"
        );
    }
}

fn capture_two(f: &mut Fixture, a: f32, b: f32) -> Graph {
    let (s, dx, dy) = (f.s.clone(), &f.dx, &mut f.dy);
    let (graph, ()) = Graph::capture(&s, || {
        saxpy(&s, a, N, dx, dy)?;
        saxpy(&s, b, N, dx, dy)
    })
    .unwrap();
    graph
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn captured_launches_run_only_when_replayed_and_every_time() {
    let gpu = gpu();
    let mut f = fixture(&gpu);
    let graph = capture_two(&mut f, 2.0, 3.0);
    assert_eq!(graph.kernel_names(), ["saxpy", "saxpy"]);
    assert_eq!(graph.node_count().unwrap(), 2);
    assert_eq!(read(&f), f.y0, "the capture ran nothing");
    // SAFETY: dx and dy outlive the graph.
    unsafe { graph.replay().unwrap() };
    assert_close(&read(&f), &expected(&f, 5.0, N));
    unsafe { graph.replay().unwrap() };
    unsafe { graph.replay().unwrap() };
    assert_close(&read(&f), &expected(&f, 15.0, N));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn updated_arguments_and_grid_take_effect_without_a_new_capture() {
    let gpu = gpu();
    let mut f = fixture(&gpu);
    let mut graph = capture_two(&mut f, 2.0, 3.0);
    let (s, dx) = (f.s.clone(), &f.dx);
    let dy = &mut f.dy;
    // New scalars, and the second launch on a prefix only (a smaller grid).
    // SAFETY: dx and dy outlive the graph.
    unsafe {
        graph
            .update(|| {
                saxpy(&s, 1.0, N, dx, dy)?;
                saxpy(&s, 10.0, N / 2, dx, dy)
            })
            .unwrap()
    };
    assert_eq!(read(&f), f.y0, "the update launched nothing");
    unsafe { graph.replay().unwrap() };
    let want: Vec<f32> = (0..N)
        .map(|i| f.y0[i] + f.x[i] + if i < N / 2 { 10.0 * f.x[i] } else { 0.0 })
        .collect();
    assert_close(&read(&f), &want);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn an_update_that_does_not_match_the_capture_is_refused() {
    let gpu = gpu();
    let mut f = fixture(&gpu);
    let mut graph = capture_two(&mut f, 2.0, 3.0);
    let (s, dx) = (f.s.clone(), &f.dx);
    let dy = &mut f.dy;
    // One launch for two nodes.
    let short = unsafe { graph.update(|| saxpy(&s, 1.0, N, dx, dy)) };
    assert!(
        matches!(short, Err(Error::InvalidArgument { .. })),
        "{short:?}"
    );
    // Three launches for two nodes.
    let long = unsafe {
        graph.update(|| {
            saxpy(&s, 1.0, N, dx, dy)?;
            saxpy(&s, 1.0, N, dx, dy)?;
            saxpy(&s, 1.0, N, dx, dy)
        })
    };
    let message = long.unwrap_err().to_string();
    assert!(message.contains("has no kernel node"), "{message}");
    // A different kernel in a node's place.
    let mut out = s.clone_htod(&[0.0f32]).unwrap();
    let other = unsafe {
        graph.update(|| {
            let cfg = LaunchConfig::grid_stride(N, demo_kernels::BLOCK_SIZE, 8);
            demo_kernels::reduce_sum::launch(&s, cfg, &U::new(dx, &s), &mut UM::new(&mut out, &s))?;
            saxpy(&s, 1.0, N, dx, dy)
        })
    };
    let message = other.unwrap_err().to_string();
    assert!(
        message.contains("runs `reduce_sum`, but its node runs `saxpy`"),
        "{message}"
    );
    // Nesting is refused, and the stream works normally afterwards.
    let nested = Graph::capture(&s, || Graph::capture(&s, || Ok(())).map(|_| ()));
    assert!(nested.is_err());
    saxpy(&s, 1.0, N, dx, dy).unwrap();
    s.synchronize().unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn an_empty_capture_or_the_default_stream_is_an_error() {
    let gpu = gpu();
    let s = gpu.context().new_stream().unwrap();
    let empty = Graph::capture(&s, || Ok(()));
    assert!(
        matches!(empty, Err(Error::InvalidArgument { .. })),
        "{empty:?}"
    );
    let default = Graph::capture(gpu.stream(), || Ok(()))
        .unwrap_err()
        .to_string();
    assert!(default.contains("legacy default stream"), "{default}");
}

/// A graph writes into managed memory through `UntrackedManagedMut` (and reads managed memory
/// through `UntrackedManaged`): the replays' result is the CPU's.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_graph_reads_and_writes_managed_memory_through_the_untracked_wrappers() {
    let gpu = gpu();
    let s = gpu.context().new_stream().unwrap();
    let (x, y0) = (input(3, N), input(4, N));
    let mx = ManagedBuffer::from_slice(&gpu, &x).unwrap();
    let mut my = ManagedBuffer::from_slice(&gpu, &y0).unwrap();
    let cfg = LaunchConfig::for_len(N, demo_kernels::BLOCK_SIZE);
    let (graph, ()) = Graph::capture(&s, || {
        let mut y = UntrackedManagedMut::new(&mut my);
        demo_kernels::saxpy::launch(&s, cfg, 2.0, &UntrackedManaged::new(&mx), &mut y)
    })
    .unwrap();
    assert_eq!(graph.kernel_names(), ["saxpy"]);
    // SAFETY: mx and my outlive the graph.
    unsafe { graph.replay().unwrap() };
    unsafe { graph.replay().unwrap() };
    s.synchronize().unwrap();
    let want: Vec<f32> = x.iter().zip(&y0).map(|(x, y)| y + 4.0 * x).collect();
    assert_close(&my.to_vec().unwrap(), &want);
}

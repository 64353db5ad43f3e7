use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

use lookahead_device::ManagedSlice;

#[kernel]
pub fn sum(x: ManagedSlice<f32>, out: &mut [f32]) {
    out[0] = x[0];
}

fn run(gpu: &lookahead::Gpu, x: &cudarc::driver::CudaSlice<f32>, out: &mut cudarc::driver::CudaSlice<f32>) -> lookahead::Result<()> {
    sum::launch(gpu, lookahead::launch::LaunchConfig::for_len(1, 32), x, out)
}

fn main() {}

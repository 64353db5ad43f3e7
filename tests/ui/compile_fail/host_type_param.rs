use lookahead_device::kernel;

use cudarc::driver::CudaSlice;

#[kernel]
pub fn k(x: CudaSlice<f32>) {
    let _ = x;
}

fn main() {}

use lookahead_device::kernel;
use lookahead_device::prelude::*;

static PTX: &[(u32, &str)] = &[];

#[kernel(ptx = PTX)]
pub fn k(x: ManagedSlice<f32>, y: &mut [f32], flags: u32) {
    #[prefetch_next(distance = 2, queue = flags)]
    for i in 0..x.len() {
        y[i] = x[i];
    }
}

fn main() {}

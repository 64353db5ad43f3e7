//! A loop without `of(..)` prefetches the kernel's slices it indexes, not a local array it
//! also indexes (in registers or on the stack: nothing to fetch).
use lookahead_device::prelude::*;

static PTX: &[(u32, &str)] = &[];

#[kernel(same_len(x, y))]
pub fn weighted(x: &[f32], y: &mut [f32]) {
    let w = [0.5f32; 8];
    #[prefetch_next(distance = 2)]
    for i in 0..8.min(y.len()) {
        y[i] = w[i] * x[i];
    }
}

fn main() {
    let emu = lookahead::emu::Emulator::new();
    let x = vec![2.0f32; 8];
    let mut y = vec![0.0f32; 8];
    weighted::launch(&emu, lookahead::launch::LaunchConfig::for_len(1, 1), &x, &mut y).unwrap();
    assert_eq!(y, [1.0; 8]);
}

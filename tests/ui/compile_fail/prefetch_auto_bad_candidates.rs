//! What `level = auto(..)` and `distance = auto(..)` accept.
use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[kernel(ptx = PTX)]
pub fn unknown_level(x: &[f32], y: &mut [f32]) {
    #[prefetch_next(level = auto(l2, l3))]
    for i in 0..x.len() {
        y[i] = x[i];
    }
}

#[kernel(ptx = PTX)]
pub fn empty_range(x: &[f32], y: &mut [f32]) {
    #[prefetch_next(level = auto, distance = auto(8..=2))]
    for i in 0..x.len() {
        y[i] = x[i];
    }
}

#[kernel(ptx = PTX)]
pub fn zero_distance(x: &[f32], y: &mut [f32]) {
    #[prefetch_next(level = auto, distance = auto(0, 4))]
    for i in 0..x.len() {
        y[i] = x[i];
    }
}

fn main() {}

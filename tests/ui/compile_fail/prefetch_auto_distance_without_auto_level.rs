//! `distance = auto` is tuned together with the level: a fixed level is an error that says
//! how to tune the distance alone.
use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[kernel(ptx = PTX)]
pub fn k(x: &[f32], y: &mut [f32]) {
    #[prefetch_next(distance = auto, level = l2)]
    for i in 0..x.len() {
        y[i] = x[i];
    }
}

fn main() {}

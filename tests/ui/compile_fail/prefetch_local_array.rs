use lookahead_device::prelude::*;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn k(y: &mut [f32]) {
    let taps = [0.25f32, 0.5, 0.25];
    #[prefetch_next(of(taps))]
    for i in 0..taps.len() {
        y[i] = taps[i];
    }
}

fn main() {}

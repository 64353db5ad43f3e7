use lookahead_device::prelude::*;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn k(x: &[f32], y: &mut [f32]) {
    #[prefetch_next(of(x[i]))]
    for i in 0..y.len() {
        y[i] = x[i];
    }
}

fn main() {}

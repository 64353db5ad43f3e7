use lookahead_device::prelude::*;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn k(x: &[f32], y: &mut [f32]) {
    #[prefetch_next(distance = 18446744073709551615)]
    for i in 0..x.len() {
        y[i] = x[i];
    }
}

fn main() {}

use lookahead_device::prelude::*;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn k(n: u32, y: &mut [f32]) {
    let n = n as usize;
    #[prefetch_next(of(n))]
    for i in 0..y.len() {
        y[i] = n as f32;
    }
}

fn main() {}

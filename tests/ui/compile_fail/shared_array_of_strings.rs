use lookahead_device::prelude::*;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn k(y: &mut [f32]) {
    let _names = shared_array!(String; 4);
    y[0] = 1.0;
}

fn main() {}

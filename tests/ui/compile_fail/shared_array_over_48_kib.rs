use lookahead_device::prelude::*;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn k(y: &mut [f32]) {
    let tile = shared_array!(f32; 16384);
    tile.set(0, 1.0);
    y[0] = tile.get(0);
}

fn main() {}

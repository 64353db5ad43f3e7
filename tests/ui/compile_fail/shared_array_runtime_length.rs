use lookahead_device::prelude::*;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn k(n: u32, y: &mut [f32]) {
    let n = n as usize;
    let tile = shared_array!(f32; n);
    tile.set(0, 1.0);
    y[0] = tile.get(0);
}

fn main() {}

//! A negative length for a shared array: the DSL's message, not rustc's about `usize`.
use lookahead_device::prelude::*;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn k(y: &mut [f32]) {
    let tile = shared_array!(f32; -1);
    tile.set(0, 1.0);
    y[0] = tile.get(0);
}

fn main() {}

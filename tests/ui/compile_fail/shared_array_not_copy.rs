//! A shared array of a type that is not `Copy`: the error points at the element type and
//! says what is required, not at a hidden constructor.
use lookahead_device::prelude::*;

static PTX: &[(u32, &str)] = &[];

pub struct Tally {
    pub n: u32,
}

#[kernel]
pub fn k(y: &mut [f32]) {
    let _tallies = shared_array!(Tally; 4);
    y[0] = 1.0;
}

fn main() {}

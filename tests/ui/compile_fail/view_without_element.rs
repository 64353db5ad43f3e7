use lookahead_device::kernel;

use lookahead_device::ManagedSlice;

#[kernel]
pub fn k(x: ManagedSlice) {
    let _ = x;
}

fn main() {}

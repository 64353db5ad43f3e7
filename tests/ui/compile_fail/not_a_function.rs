use lookahead_device::kernel;

#[kernel]
pub struct K;

fn main() {}

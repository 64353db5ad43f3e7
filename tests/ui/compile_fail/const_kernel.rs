use lookahead_device::kernel;

#[kernel]
pub const fn k(n: u32) {
    let _ = n;
}

fn main() {}

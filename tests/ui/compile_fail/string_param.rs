use lookahead_device::kernel;

#[kernel]
pub fn k(s: String) {
    let _ = s;
}

fn main() {}

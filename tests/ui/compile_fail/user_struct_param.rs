use lookahead_device::kernel;

#[derive(Clone, Copy)]
pub struct Pair {
    pub a: f32,
}

#[kernel]
pub fn k(p: Pair) {
    let _ = p;
}

fn main() {}

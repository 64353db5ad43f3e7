use lookahead_device::kernel;

pub struct S;

impl S {
    #[kernel]
    pub fn k(self) {}
}

fn main() {}

use lookahead_device::DeviceCopy;

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
pub enum Op {
    Add,
    Mul,
}

fn main() {}

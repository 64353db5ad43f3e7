use lookahead_device::DeviceCopy;

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
pub struct Pair<T> {
    pub a: T,
    pub b: T,
}

fn main() {}

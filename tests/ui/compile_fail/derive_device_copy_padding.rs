use lookahead_device::DeviceCopy;

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
pub struct Mixed {
    pub flag: u8,
    pub value: f64,
}

fn main() {}

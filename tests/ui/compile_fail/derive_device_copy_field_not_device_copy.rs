use lookahead_device::DeviceCopy;

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
pub struct Flagged {
    pub value: f32,
    pub valid: bool,
    pub _pad: [u8; 3],
}

fn main() {}

use lookahead_device::DeviceCopy;

#[derive(DeviceCopy)]
#[repr(C)]
pub struct Node {
    pub next: u32,
    pub value: f32,
}

fn main() {}

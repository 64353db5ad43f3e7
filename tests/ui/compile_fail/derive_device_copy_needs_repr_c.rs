use lookahead_device::DeviceCopy;

#[derive(Clone, Copy, DeviceCopy)]
pub struct Node {
    pub next: u32,
    pub value: f32,
}

fn main() {}

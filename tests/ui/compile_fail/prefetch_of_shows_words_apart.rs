//! Code quoted in a message keeps the words the user wrote apart (`.next as usize`).
use lookahead_device::prelude::*;

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
pub struct Node {
    pub next: u32,
    pub value: f32,
}

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn chase(nodes: &[Node], steps: u32, out: &mut [f32]) {
    let mut cur = 0usize;
    let mut sum = 0.0;
    #[prefetch_next(distance = 2, of(nodes.at(nodes[cur].next as usize)))]
    for _step in 0..steps {
        sum += nodes[cur].value;
        cur = nodes[cur].next as usize;
    }
    out[0] = sum;
}

fn main() {}

use lookahead_device::prelude::*;

static PTX: &[(u32, &str)] = &[];

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
pub struct Node {
    pub next: u32,
    pub value: f32,
}

#[kernel(same_len(starts, sums))]
pub fn chase(nodes: &[Node], starts: &[u32], steps: u32, sums: &mut [f32]) {
    let t = global_index_x();
    if t < starts.len() {
        let (mut next, mut sum) = (starts[t] as usize, 0.0);
        #[prefetch_next(distance = 2, of(nodes.at(next)))]
        for _step in 0..steps {
            sum += nodes[next].value;
            next = nodes[next].next as usize;
        }
        sums[t] = sum;
    }
}

fn main() {}

#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_gpu_kernel))]

#[cfg(not(target_arch = "nvptx64"))]
include!(concat!(env!("OUT_DIR"), "/my_kernels_ptx.rs"));

use lookahead_device::prelude::*;

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
        let (mut at, mut sum) = (starts[t] as usize, 0.0);
        for _ in 0..steps {
            let node = nodes[at];
            at = node.next as usize;
            // The next node is known only now: prefetch it by hand while this one is used.
            prefetch::prefetch_l2(nodes.as_ptr().wrapping_add(at));
            sum += node.value;
        }
        sums[t] = sum;
    }
}

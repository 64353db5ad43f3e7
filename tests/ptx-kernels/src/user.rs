//! The user's own types as parameters: a slice of a `DeviceCopy` struct, one by value, a
//! `KernelParams` bundle, and launch bounds; with the CPU reference of the pointer chase.

#[cfg(not(target_arch = "nvptx64"))]
use std::{vec, vec::Vec};

use lookahead_device::prelude::*;

/// A node of a linked structure: the index of the next node and a value.
#[derive(Debug, Clone, Copy, PartialEq, DeviceCopy)]
#[repr(C)]
pub struct Node {
    /// Index of the next node.
    pub next: u32,
    /// The node's value.
    pub value: f32,
}

/// How [`user_chase`] walks: how many links, and what to scale the sum by.
#[derive(Debug, Clone, Copy, PartialEq, DeviceCopy)]
#[repr(C)]
pub struct Walk {
    /// Links to follow.
    pub steps: u32,
    /// Factor applied to each chain's sum.
    pub scale: f32,
}

/// Thread `t` follows `walk.steps` links from node `starts[t]`, summing the values it visits
/// (the start's included), and writes the sum times `walk.scale` to `sums[t]`. A slice of the
/// user's own struct and a struct by value.
#[kernel(same_len(starts, sums))]
pub fn user_chase(nodes: &[Node], starts: &[u32], walk: Walk, sums: &mut [f32]) {
    let t = global_index_x();
    if t >= starts.len() {
        return;
    }
    let mut at = starts[t] as usize;
    let mut sum = 0.0f32;
    for _ in 0..=walk.steps {
        let n = nodes[at];
        sum += n.value;
        at = n.next as usize;
    }
    sums[t] = sum * walk.scale;
}

/// `y = a * x + y` with its parameters grouped in one struct of views and values.
#[derive(KernelParams)]
#[repr(C)]
pub struct Axpy {
    /// Read.
    pub x: DeviceSlice<f32>,
    /// Read and written.
    pub y: DeviceSliceMut<f32>,
    /// The factor.
    pub a: f32,
    /// How many elements each thread does, one grid stride apart.
    pub per_thread: u32,
}

/// `p.y[i] = p.a * p.x[i] + p.y[i]`, grid-stride.
#[kernel]
pub fn user_axpy(mut p: Axpy) {
    let n = p.x.len().min(p.y.len());
    let mut i = global_index_x();
    let mut k = 0;
    while i < n && k < p.per_thread {
        p.y[i] += p.a * p.x[i];
        i += grid_stride_x();
        k += 1;
    }
}

/// `y[i] = 2 x[i]`, for blocks of at most 128 threads, 4 of them resident per multiprocessor
/// (CUDA's `__launch_bounds__(128, 4)`).
#[kernel(same_len(x, y), launch_bounds(threads = 128, blocks_per_sm = 4))]
pub fn user_bounded(x: &[f32], y: &mut [f32]) {
    let i = global_index_x();
    if i < x.len() {
        y[i] = 2.0 * x[i];
    }
}

/// The CPU reference of [`user_chase`].
#[cfg(not(target_arch = "nvptx64"))]
pub fn chase_reference(nodes: &[Node], starts: &[u32], walk: Walk) -> Vec<f32> {
    starts
        .iter()
        .map(|&s| {
            let (mut at, mut sum) = (s as usize, 0.0f32);
            for _ in 0..=walk.steps {
                sum += nodes[at].value;
                at = nodes[at].next as usize;
            }
            sum * walk.scale
        })
        .collect()
}

/// `n` nodes whose links form one random cycle, with values from `value(i)`, and a start per
/// chain from `start(t)`: a pointer chase's data.
#[cfg(not(target_arch = "nvptx64"))]
pub fn random_nodes(
    n: usize,
    mut next_random: impl FnMut(usize) -> usize,
    value: impl Fn(usize) -> f32,
) -> Vec<Node> {
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        order.swap(i, next_random(i + 1));
    }
    let mut nodes = vec![
        Node {
            next: 0,
            value: 0.0
        };
        n
    ];
    for k in 0..n {
        let (here, there) = (order[k], order[(k + 1) % n]);
        nodes[here] = Node {
            next: there as u32,
            value: value(here),
        };
    }
    nodes
}

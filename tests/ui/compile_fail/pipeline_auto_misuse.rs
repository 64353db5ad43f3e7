// `stages = auto` and `copy = auto` where they cannot be tuned or are malformed: each gets
// its own error at what is wrong.
use lookahead_device::prelude::*;

static PTX: &[(u32, &str)] = &[];

// A device function is not an entry: nothing to choose between at launch.
#[device_fn]
fn staged_sum(x: &[f32], tiles: usize) -> f32 {
    let mut s = 0.0;
    #[prefetch_next(into = shared([f32; 256]), stages = auto, of(t = &x[i * 256..(i + 1) * 256]))]
    for i in 0..tiles {
        s += t[0];
    }
    s
}

// Hints and pipelines are not tuned in one kernel.
#[kernel]
pub fn hints_and_pipelines(x: &[f32], out: &mut [f32]) {
    let tiles = x.len() / 256;
    #[prefetch_next(into = shared([f32; 256]), stages = auto, of(t = &x[i * 256..(i + 1) * 256]))]
    for i in 0..tiles {
        out[0] += t[0];
    }
    #[prefetch_next(level = auto)]
    for i in 0..x.len() {
        out[0] += x[i];
    }
}

// Two tuned pipelines of one kernel share its entries: different candidates are refused.
#[kernel]
pub fn two_candidate_sets(x: &[f32], out: &mut [f32]) {
    let tiles = x.len() / 256;
    #[prefetch_next(into = shared([f32; 256]), stages = auto, of(t = &x[i * 256..(i + 1) * 256]))]
    for i in 0..tiles {
        out[0] += t[0];
    }
    #[prefetch_next(into = shared([f32; 256]), stages = auto(2, 6), of(t = &x[i * 256..(i + 1) * 256]))]
    for i in 0..tiles {
        out[0] += t[0];
    }
}

// Malformed lists.
#[kernel]
pub fn malformed(x: &[f32], out: &mut [f32]) {
    let tiles = x.len() / 256;
    #[prefetch_next(into = shared([f32; 256]), stages = auto(1, 3), of(t = &x[i * 256..(i + 1) * 256]))]
    for i in 0..tiles {
        out[0] += t[0];
    }
    #[prefetch_next(into = shared([f32; 256]), copy = auto(), of(t = &x[i * 256..(i + 1) * 256]))]
    for i in 0..tiles {
        out[0] += t[0];
    }
}

fn main() {
    let _ = staged_sum;
}

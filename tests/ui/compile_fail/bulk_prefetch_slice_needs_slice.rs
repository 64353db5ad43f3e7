use lookahead_device::{device_fn, prefetch};

#[device_fn]
fn helper(x: &[f32]) {
    prefetch::bulk_prefetch_slice(x[0]);
}

fn main() {}

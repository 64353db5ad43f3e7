use lookahead_device::device_fn;

#[device_fn]
async fn helper(x: &[f32]) -> f32 {
    x[0]
}

fn main() {}

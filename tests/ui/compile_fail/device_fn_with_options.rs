use lookahead_device::device_fn;

#[device_fn(inline)]
fn helper(x: &[f32]) -> f32 {
    x[0]
}

fn main() {}

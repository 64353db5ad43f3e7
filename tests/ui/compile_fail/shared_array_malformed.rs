use lookahead_device::{device_fn, shared_array};

#[device_fn]
fn helper() {
    let _t = shared_array!(f32, 256);
}

fn main() {}

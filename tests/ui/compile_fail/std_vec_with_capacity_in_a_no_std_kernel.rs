#![no_std]
extern crate std; // for `main`: the kernel still sees no `Vec`
use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn k(y: &mut [f32]) {
    let v: Vec<f32> = Vec::with_capacity(4);
    y[0] = 1.0;
    let _ = v;
}

fn main() {}

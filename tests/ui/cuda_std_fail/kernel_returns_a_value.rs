use cuda_std::prelude::*;

#[kernel]
pub unsafe fn sum(a: &[f32]) -> f32 {
    a[0]
}

fn main() {}

use cuda_std::prelude::*;

#[kernel]
pub unsafe fn fill<T: Copy>(out: *mut T, value: T) {
    *out = value;
}

fn main() {}

use lookahead_device::kernel;

#[kernel]
pub fn k<T: Copy>(x: &[T]) {
    let _ = x;
}

fn main() {}

use lookahead_device::kernel;

#[kernel]
pub fn k<'a>(x: &'a [f32]) {
    let _ = x;
}

fn main() {}

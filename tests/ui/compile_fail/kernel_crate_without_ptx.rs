use lookahead_device::kernel;

#[kernel]
pub fn scale(a: f32, y: &mut [f32]) {
    for v in y.iter_mut() {
        *v *= a;
    }
}

fn main() {}

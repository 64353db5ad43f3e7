use lookahead_device::kernel;

#[kernel]
pub fn k(x: &[f32], y: &mut [f32]) {
    let mut i = 0;
    #[prefetch_next]
    while i < x.len() {
        y[i] = x[i];
        i += 1;
    }
}

fn main() {}

use lookahead_device::kernel;

#[kernel]
pub fn k(x: &[f32], y: &mut [f32]) {
    #[prefetch_next]
    for i in 0.. {
        if i >= x.len() {
            break;
        }
        y[i] = x[i];
    }
}

fn main() {}

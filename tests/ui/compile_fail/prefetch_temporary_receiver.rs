use lookahead_device::kernel;

#[kernel]
pub fn k(x: &[f32], y: &mut [f32]) {
    let mut acc = 0.0;
    #[prefetch_next]
    for v in x[1..].iter() {
        acc += *v;
    }
    y[0] = acc;
}

fn main() {}

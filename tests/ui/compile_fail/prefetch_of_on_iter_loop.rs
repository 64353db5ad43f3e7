use lookahead_device::kernel;

#[kernel]
pub fn k(x: &[f32], y: &mut [f32]) {
    let mut acc = 0.0;
    #[prefetch_next(distance = 4, of(y))]
    for v in x.iter() {
        acc += *v;
    }
    y[0] = acc;
}

fn main() {}

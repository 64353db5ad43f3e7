use lookahead_device::device_fn;

#[device_fn]
fn sum(x: &[f32]) -> f32 {
    let mut acc = 0.0;
    #[prefetch_next(level = auto, distance = 4)]
    for i in 0..x.len() {
        acc += x[i];
    }
    acc
}

fn main() {
    let _ = sum(&[1.0]);
}

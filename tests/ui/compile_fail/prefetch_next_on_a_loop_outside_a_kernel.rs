use lookahead_device::prefetch_next;

pub fn host_loop(x: &[f32]) -> f32 {
    let mut s = 0.0;
    #[prefetch_next(distance = 4)]
    for i in 0..x.len() {
        s += x[i];
    }
    s
}

fn main() {}

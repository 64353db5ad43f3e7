use lookahead_device::prefetch_next;

#[prefetch_next(distance = 2)]
pub fn helper(x: &[f32]) -> f32 {
    x[0]
}

fn main() {}

use lookahead_device::prelude::*;

#[kernel]
pub fn sum_all(x: &[f32], out: &mut [f32]) {
    macro_rules! sum {
        ($xs:expr) => {{
            let mut s = 0.0;
            #[prefetch_next(distance = 4)]
            for i in 0..$xs.len() {
                s += $xs[i];
            }
            s
        }};
    }
    out[0] = sum!(x);
}

fn main() {}

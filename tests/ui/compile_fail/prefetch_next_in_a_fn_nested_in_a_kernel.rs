use lookahead_device::prelude::*;

#[kernel]
pub fn sum_rows(x: &[f32], out: &mut [f32]) {
    fn row_sum(x: &[f32]) -> f32 {
        let mut s = 0.0;
        #[prefetch_next(distance = 4)]
        for i in 0..x.len() {
            s += x[i];
        }
        s
    }
    out[0] = row_sum(x);
}

fn main() {}

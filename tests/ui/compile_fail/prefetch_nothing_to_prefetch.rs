use lookahead_device::kernel;

#[kernel]
pub fn k(y: &mut [u32]) {
    let mut acc = 0u32;
    #[prefetch_next]
    for i in 0..100u32 {
        acc += i;
    }
    y[0] = acc;
}

fn main() {}

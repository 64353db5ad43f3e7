use lookahead_device::kernel;

#[kernel]
pub fn k(
    x: lookahead_device::ManagedSlice<f32>,
    y: &mut [f32],
    q: lookahead_device::uvm::requests::RequestQueue,
) {
    #[prefetch_next(distance = 2, queue(q))]
    for i in 0..x.len() {
        y[i] = x[i];
    }
}

fn main() {}

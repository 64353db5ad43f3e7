use lookahead_device::uvm::RequestQueue;

fn main() {
    let q = RequestQueue {
        capacity: 4,
        ..RequestQueue::disabled()
    };
    let _ = q;
}

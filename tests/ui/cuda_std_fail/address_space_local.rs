#[cuda_std::address_space(local)]
static mut SCRATCH: [f32; 4] = [0.0; 4];

fn main() {}

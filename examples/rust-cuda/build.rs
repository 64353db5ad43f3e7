// As in a Rust-CUDA host crate: build the kernel crate into PTX.
use cuda_builder::CudaBuilder;

fn main() {
    CudaBuilder::new("kernels").build().unwrap();
}

use lookahead_device::prelude::*;

static PTX: &[(u32, &str)] = &[];

#[derive(KernelParams)]
#[repr(C)]
pub struct Inputs {
    pub lists: ManagedSlice<f32>,
    pub out: DeviceSliceMut<f32>,
}

#[kernel]
pub fn copy(mut p: Inputs) {
    p.out[0] = p.lists[0];
}

fn run(gpu: &lookahead::Gpu, x: &cudarc::driver::CudaSlice<f32>, out: &mut cudarc::driver::CudaSlice<f32>) -> lookahead::Result<()> {
    copy::launch(gpu, lookahead::launch::LaunchConfig::for_len(1, 32), InputsArgs { lists: x, out })
}

fn main() {}

use lookahead_device::{DeviceSlice, KernelParams};

#[derive(KernelParams)]
#[repr(C)]
pub struct Inputs(pub DeviceSlice<f32>, pub DeviceSlice<f32>);

fn main() {}

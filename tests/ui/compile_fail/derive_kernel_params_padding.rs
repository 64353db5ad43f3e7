use lookahead_device::{DeviceSlice, KernelParams};

#[derive(KernelParams)]
#[repr(C)]
pub struct Inputs {
    pub x: DeviceSlice<f32>,
    pub n: u32,
}

fn main() {}

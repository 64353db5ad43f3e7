use lookahead_device::{DeviceCopy, DeviceSlice};

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
pub struct Holder {
    pub data: DeviceSlice<f32>,
}

fn main() {}

use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[derive(Clone, Copy)]
#[repr(C)]
pub struct Settings {
    pub scale: f32,
}

#[kernel]
pub fn scale(s: Settings, out: &mut [f32]) {
    out[0] *= s.scale;
}

fn main() {}

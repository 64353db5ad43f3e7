// One stage at a time: a second wait (which lets the first stage's buffer be refilled)
// while the first stage is still read does not compile.
use lookahead_device::pipeline::CpAsync;
use lookahead_device::{kernel, pipeline};

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn two_stages(x: &[f32], out: &mut [f32]) {
    let mut p = pipeline!(f32; 256, stages = 3, copy = CpAsync);
    p.issue(|c| c.slice(0, &x[..256]));
    p.issue(|c| c.slice(0, &x[256..512]));
    let first = p.wait();
    let second = p.wait();
    out[0] = first.data()[0] + second.data()[0];
}

fn main() {}

// While a stage is read, the next stage is issued through its `Ready` (`refill`, which
// never targets the buffer being read), not through the pipeline.
use lookahead_device::pipeline::CpAsync;
use lookahead_device::{kernel, pipeline};

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn issue_while_reading(x: &[f32], out: &mut [f32]) {
    let mut p = pipeline!(f32; 256, stages = 2, copy = CpAsync);
    p.issue(|c| c.slice(0, &x[..256]));
    let stage = p.wait();
    p.issue(|c| c.slice(0, &x[256..512]));
    out[0] = stage.data()[0];
}

fn main() {}

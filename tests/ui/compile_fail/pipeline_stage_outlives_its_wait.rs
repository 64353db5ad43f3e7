// A stage's data is only reachable through the `Ready` its wait returned, and only while it
// lives: keeping a reference past it (when the buffer may be refilled) does not compile.
use lookahead_device::pipeline::CpAsync;
use lookahead_device::{kernel, pipeline};

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn keeps_a_stage(x: &[f32], out: &mut [f32]) {
    let mut p = pipeline!(f32; 256, stages = 2, copy = CpAsync);
    p.issue(|c| c.slice(0, &x[..256]));
    let data = {
        let stage = p.wait();
        stage.data()
    };
    out[0] = data[0];
}

fn main() {}

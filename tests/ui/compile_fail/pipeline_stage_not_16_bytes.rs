// A pipeline stage must be a multiple of 16 bytes (each stage starts 16-byte aligned for
// cp.async.cg and bulk copies): 10 bytes do not compile.
use lookahead_device::pipeline;
use lookahead_device::pipeline::CpAsync;

fn main() {
    let _p = pipeline!(u8; 10, stages = 2, copy = CpAsync);
}

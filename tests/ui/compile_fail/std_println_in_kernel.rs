use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn k(y: &mut [f32]) {
    println!("y has {} elements", y.len());
}

fn main() {}

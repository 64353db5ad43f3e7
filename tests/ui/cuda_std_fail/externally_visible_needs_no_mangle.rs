#[cuda_std::externally_visible]
pub extern "C" fn helper(x: u32) -> u32 {
    x + 1
}

fn main() {}

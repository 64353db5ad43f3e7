//! `#[prefetch_next(cache = c)]` names the element ranges of the cache a later iteration
//! reads, and takes no level or queue.
use lookahead_device::cache::HostCached;
use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[kernel(ptx = PTX)]
pub fn no_ranges(c: HostCached<f32>, out: &mut [f32]) {
    #[prefetch_next(cache = c, distance = 2)]
    for i in 0..out.len() {
        out[i] = c.get(i);
    }
}

#[kernel(ptx = PTX)]
pub fn with_a_level(c: HostCached<f32>, out: &mut [f32]) {
    #[prefetch_next(cache = c, level = l1, of(i * 4..i * 4 + 4))]
    for i in 0..out.len() {
        out[i] = c.get(i * 4);
    }
}

#[kernel(ptx = PTX)]
pub fn on_an_iterator(c: HostCached<f32>, out: &mut [f32]) {
    #[prefetch_next(cache = c, of(0..4))]
    for x in out.iter_mut() {
        *x = 0.0;
    }
    let _ = c;
}

fn main() {}

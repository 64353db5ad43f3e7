// Each pipelined #[prefetch_next] below is malformed in one way; each gets its own error
// at what is wrong, with the form to write.
use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn misuses(x: &[f32], out: &mut [f32]) {
    let tiles = x.len() / 256;
    #[prefetch_next(into = shared([f32; 256]), stages = 9, of(t = &x[i * 256..(i + 1) * 256]))]
    for i in 0..tiles {
        out[0] += t[0];
    }
    #[prefetch_next(into = shared([f32; 256]), copy = tma, of(t = &x[i * 256..(i + 1) * 256]))]
    for i in 0..tiles {
        out[0] += t[0];
    }
    #[prefetch_next(into = shared([f32; 256]), of(&x[i * 256..(i + 1) * 256]))]
    for i in 0..tiles {
        out[0] += x[i];
    }
    #[prefetch_next(into = shared([f32; 256]), distance = 2, of(t = &x[i * 256..(i + 1) * 256]))]
    for i in 0..tiles {
        out[0] += t[0];
    }
    #[prefetch_next(into = shared(f32), of(t = &x[i * 256..(i + 1) * 256]))]
    for i in 0..tiles {
        out[0] += t[0];
    }
    #[prefetch_next(into = shared([f32; 256]), of(t = &x[i * 256..(i + 1) * 256]))]
    for i in x.iter() {
        out[0] += t[0];
    }
    #[prefetch_next(into = shared([f32; 256]))]
    for i in 0..tiles {
        out[0] += x[i];
    }
}

fn main() {}

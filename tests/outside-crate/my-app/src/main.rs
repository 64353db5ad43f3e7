//! Runs `chase` on the emulator and checks it against the CPU.
use lookahead::{emu::Emulator, launch::LaunchConfig};
use my_kernels::{chase, Node};

fn main() -> lookahead::Result<()> {
    let n = 1000u32;
    let nodes: Vec<Node> = (0..n)
        .map(|i| Node {
            next: (i * 7 + 3) % n,
            value: i as f32,
        })
        .collect();
    let starts: Vec<u32> = (0..100).map(|t| t * 10).collect();
    let mut sums = vec![f32::NAN; starts.len()];
    let cfg = LaunchConfig::for_len(starts.len(), 32);
    chase::launch(&Emulator::new(), cfg, &nodes, &starts, 8, &mut sums)?;
    for (t, &s) in starts.iter().enumerate() {
        let (mut at, mut want) = (s as usize, 0.0f32);
        for _ in 0..8 {
            want += nodes[at].value;
            at = nodes[at].next as usize;
        }
        assert_eq!(sums[t], want, "chain {t}");
    }
    let archs: Vec<_> = my_kernels::PTX.iter().map(|p| p.0).collect();
    println!(
        "my-kernels: {} chains match the CPU; PTX for {archs:?}",
        starts.len()
    );
    Ok(())
}

//! The pointer chase: each thread follows `steps` links through one random cycle of nodes.

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use rand::rngs::StdRng;
use rand::Rng;
use vs_cuda_kernels::{Node, BLOCK_SIZE};

use super::{addr, grid_cfg, par_fill, scaled, Bench, Checked, Env};
use crate::Res;

pub struct Chase {
    chains: usize,
    steps: u32,
    /// [`Node`]s as (next, value bits) pairs of u32.
    nodes: CudaSlice<u32>,
    starts: CudaSlice<u32>,
    out: Checked,
    cfg: LaunchConfig,
}

/// `count` nodes linked in one random cycle through all of them (Sattolo's shuffle), so
/// no chain gets stuck in a short cycle that would stay in cache; random values.
fn random_cycle(rng: &mut StdRng, count: usize) -> Vec<Node> {
    let mut perm: Vec<u32> = (0..count as u32).collect();
    for i in (1..count).rev() {
        let j = rng.gen_range(0..i);
        perm.swap(i, j);
    }
    let mut nodes = vec![Node { next: 0, val: 0.0 }; count];
    for i in 0..count {
        nodes[perm[i] as usize] = Node {
            next: perm[(i + 1) % count],
            val: rng.gen_range(-1.0..1.0),
        };
    }
    nodes
}

/// The sum of the values of `steps` nodes from `start` on, added in f32 as the kernel does.
fn walk(nodes: &[Node], start: u32, steps: u32) -> f64 {
    let mut cur = start as usize;
    let mut acc = 0.0f32;
    for _ in 0..steps {
        acc += nodes[cur].val;
        cur = nodes[cur].next as usize;
    }
    acc as f64
}

impl Chase {
    pub fn new(env: &Env, rng: &mut StdRng, scale: f64) -> Res<Self> {
        let count = scaled(32 << 20, scale);
        let nodes = random_cycle(rng, count);
        let chains = env.sms as usize * 2048;
        let steps = 64u32;
        let starts: Vec<u32> = (0..chains)
            .map(|_| rng.gen_range(0..count as u32))
            .collect();
        let mut want = vec![0.0f64; chains];
        par_fill(&mut want, |first, chunk| {
            for (k, w) in chunk.iter_mut().enumerate() {
                *w = walk(&nodes, starts[first + k], steps);
            }
        });
        let flat: Vec<u32> = nodes
            .iter()
            .flat_map(|n| [n.next, n.val.to_bits()])
            .collect();
        Ok(Chase {
            chains,
            steps,
            nodes: env.upload(&flat)?,
            starts: env.upload(&starts)?,
            out: Checked::new(env, want, 1e-6)?,
            cfg: grid_cfg(chains.div_ceil(BLOCK_SIZE as usize) as u32),
        })
    }
}

impl Bench for Chase {
    fn kernel(&self) -> &'static str {
        "chase"
    }
    fn cfg(&self) -> LaunchConfig {
        self.cfg
    }
    fn bytes(&self) -> f64 {
        (self.chains * self.steps as usize * 8 + self.chains * 8) as f64
    }
    fn launch(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()> {
        let (n, s, o) = (
            addr(&self.nodes, stream),
            addr(&self.starts, stream),
            addr(&self.out.buf, stream),
        );
        let mut l = stream.launch_builder(f);
        l.arg(&n).arg(&s).arg(&self.chains).arg(&self.steps).arg(&o);
        // SAFETY: (*const Node, *const u32, usize, u32, *mut f32) as the kernel declares.
        unsafe { l.launch(self.cfg) }?;
        Ok(())
    }
    fn reset(&mut self, env: &Env) -> Res<()> {
        self.out.reset(env)
    }
    fn check(&self, env: &Env) -> Res<(bool, String)> {
        self.out.check(env)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn the_cycle_visits_every_node_once() {
        let nodes = random_cycle(&mut StdRng::seed_from_u64(7), 1000);
        let mut seen = vec![false; nodes.len()];
        let mut cur = 0;
        for _ in 0..nodes.len() {
            assert!(!seen[cur], "node {cur} came back early");
            seen[cur] = true;
            cur = nodes[cur].next as usize;
        }
        assert_eq!(cur, 0, "back at the start after every node");
    }

    #[test]
    fn walk_sums_the_values_along_the_links() {
        let n = |next, val| Node { next, val };
        let nodes = [n(1, 1.0), n(2, 2.0), n(0, 4.0)];
        assert_eq!(walk(&nodes, 1, 4), 2.0 + 4.0 + 1.0 + 2.0);
        assert_eq!(walk(&nodes, 0, 0), 0.0);
    }
}

//! The sharded IVF search over several GPUs: an index bigger than one GPU's memory, its lists
//! in host memory split by bytes over the GPUs, each shard reading its cold lists through
//! the GPU-driven pull over its own host link.
//!
//! For each index size (`--small-gib`, which one GPU can also hold, and `--big-gib`, which it
//! cannot), in this process with one thread per GPU:
//! - the pinned host-to-device copy rate of each GPU alone and of all at once;
//! - one GPU's search of the whole index (pulled into its memory where it fits, else read
//!   in place): the reference answer and the one-GPU warm throughput;
//! - the sharded search with an NCCL all-gather merge: a cold batch (every shard's copy
//!   empty: needed bytes against the summed pinned rate) and warm batches;
//! - the same shards gathered by peer copies into GPU 0 instead of NCCL;
//! - recall@10 against brute force, and the all-gather of one batch's results alone.
//!
//! With `--ranks` equal to the GPU count, the same sharded search then runs as one process
//! per GPU (started here, meeting over a TCP rendezvous on loopback, NCCL between them),
//! every rank's answer checked against this process's one-GPU answer.
//!
//! `ivf_shards --gpus 0,1 --ranks 2 --out results` (see `scripts/multi-gpu.sh`).

mod build;
mod inproc;
mod rank;
mod rates;
mod report;
mod run;

use std::error::Error as StdError;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use lookahead_bench::args::{at_least, float_range, in_range, Validate};

type Res<T> = Result<T, Box<dyn StdError>>;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "ivf_shards",
    about = "The IVF search sharded over several GPUs, in one process and one process per GPU"
)]
pub(crate) struct Args {
    /// GPUs (ordinals, comma-separated); every GPU when not given.
    #[arg(long, value_delimiter = ',')]
    gpus: Vec<usize>,
    /// Processes: 1 runs everything in this process; the GPU count also runs one process
    /// per GPU after the in-process runs.
    #[arg(long, default_value_t = 1, value_parser = at_least(1usize))]
    ranks: usize,
    /// The index one GPU can hold too, GiB of list vectors in all (0: none).
    #[arg(long, default_value_t = 24.0, value_parser = float_range(0.0, None))]
    small_gib: f64,
    /// The index bigger than one GPU, GiB of list vectors in all (0: none).
    #[arg(long, default_value_t = 120.0, value_parser = float_range(0.0, None))]
    big_gib: f64,
    /// Dimensions (4 to 128).
    #[arg(long, default_value_t = 128, value_parser = in_range(4usize, ivf_kernels::MAX_DIM))]
    dim: usize,
    /// Lists of the small index.
    #[arg(long, default_value_t = 4096, value_parser = at_least(2usize))]
    small_nlist: usize,
    /// Lists of the big index.
    #[arg(long, default_value_t = 16384, value_parser = at_least(2usize))]
    big_nlist: usize,
    /// Queries a batch, small index.
    #[arg(long, default_value_t = 1024, value_parser = in_range(1usize, 65536))]
    small_queries: usize,
    /// Queries a batch, big index.
    #[arg(long, default_value_t = 512, value_parser = in_range(1usize, 65536))]
    big_queries: usize,
    /// Probes a query, small index.
    #[arg(long, default_value_t = 32, value_parser = in_range(1usize, ivf_kernels::MAX_NPROBE))]
    small_nprobe: usize,
    /// Probes a query, big index.
    #[arg(long, default_value_t = 16, value_parser = in_range(1usize, ivf_kernels::MAX_NPROBE))]
    big_nprobe: usize,
    /// Timed warm batches of each configuration.
    #[arg(long, default_value_t = 8, value_parser = at_least(2usize))]
    batches: usize,
    /// Queries whose exact neighbours are computed for recall@10.
    #[arg(long, default_value_t = 16, value_parser = at_least(1usize))]
    recall_queries: usize,
    /// Seconds any wait on another rank may take (collectives, rendezvous).
    #[arg(long, default_value_t = 120, value_parser = at_least(1u64))]
    timeout_s: u64,
    /// Seed of the data and the queries.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Folder for ivf_shards.md and ivf_shards.csv (and the ranks' working files).
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Run as this rank of a process run (set by the launching process).
    #[arg(long, hide = true)]
    rank: Option<usize>,
    /// Rank 0's address for the rendezvous (set by the launching process).
    #[arg(long, hide = true)]
    rendezvous: Option<String>,
}

impl Validate for Args {
    fn validate(&self) -> Result<(), String> {
        if self.ranks > 1 && !self.gpus.is_empty() && self.ranks != self.gpus.len() {
            return Err(format!(
                "--ranks {} with {} GPUs: a process run has one process per GPU (--ranks 1 \
                 runs every GPU in one process)",
                self.ranks,
                self.gpus.len()
            ));
        }
        if self.rank.is_some() != self.rendezvous.is_some() {
            return Err("--rank and --rendezvous go together".into());
        }
        Ok(())
    }
}

fn main() -> ExitCode {
    let args: Args = lookahead_bench::args::parse();
    let result = match args.rank {
        Some(r) => rank::run(&args, r).map(|()| true),
        None => run::coordinate(&args),
    };
    lookahead_bench::exit_code(result, "This benchmark needs at least one.")
}

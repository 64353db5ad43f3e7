//! The indexes measured: their sizes and shapes, and their lists generated straight into
//! host memory that the GPUs read (all of them in one process, or one rank's part).

use lookahead::Gpu;
use lookahead_ivf::data::Vectors;
use lookahead_ivf::index::IvfLayout;
use lookahead_ivf::shard::{Partition, Synthetic};
use lookahead_multi::HostArray;

use crate::{Args, Res};

/// One index size of the run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Size {
    /// `small` or `big`.
    pub name: &'static str,
    pub gib: f64,
    pub nlist: usize,
    pub queries: usize,
    pub nprobe: usize,
}

/// The sizes `args` asks for (those of more than 0 GiB).
pub(crate) fn sizes(args: &Args) -> Vec<Size> {
    [
        Size {
            name: "small",
            gib: args.small_gib,
            nlist: args.small_nlist,
            queries: args.small_queries,
            nprobe: args.small_nprobe,
        },
        Size {
            name: "big",
            gib: args.big_gib,
            nlist: args.big_nlist,
            queries: args.big_queries,
            nprobe: args.big_nprobe,
        },
    ]
    .into_iter()
    .filter(|s| s.gib > 0.0)
    .collect()
}

impl Size {
    /// The generator of this index.
    pub fn spec(&self, args: &Args) -> Synthetic {
        let bytes = (self.gib * (1u64 << 30) as f64) as u64;
        Synthetic {
            dim: args.dim,
            nlist: self.nlist,
            vectors: Synthetic::vectors_in(bytes, args.dim),
            spread: 1.0,
            sigma: 0.5,
            seed: args.seed ^ self.nlist as u64,
        }
    }

    /// The batch every configuration searches.
    pub fn batch(&self, args: &Args) -> Vectors {
        self.spec(args).queries(self.queries, 1)
    }
}

/// A whole index in this process: layout, partition over the GPUs, and the lists.
pub(crate) struct Whole {
    pub layout: IvfLayout,
    pub partition: Partition,
    pub lists: HostArray<f32>,
}

/// Generates the whole index of `size` into host memory mapped for every GPU of `gpus`.
pub(crate) fn whole(args: &Args, size: &Size, gpus: &[Gpu]) -> Res<Whole> {
    let spec = size.spec(args);
    let layout = spec.layout();
    let partition = Partition::by_bytes(&layout, gpus.len());
    let offsets = &layout.offsets;
    let lists = HostArray::from_rows(gpus, spec.vectors, spec.dim, |first, rows| {
        spec.fill(offsets, first, rows)
    })?;
    Ok(Whole {
        layout,
        partition,
        lists,
    })
}

/// One rank's part: its layout (the others' lists empty) and its lists alone.
pub(crate) struct Part {
    pub layout: IvfLayout,
    pub lists: HostArray<f32>,
}

/// Generates rank `rank`'s part of the index of `size` (of `ranks`) on `gpu`.
pub(crate) fn part(args: &Args, size: &Size, gpu: &Gpu, rank: usize, ranks: usize) -> Res<Part> {
    let spec = size.spec(args);
    let offsets = spec.offsets();
    let partition = Partition::of_offsets(&offsets, (spec.dim * 4) as u64, ranks);
    let rows = partition.vectors(rank);
    let layout = IvfLayout {
        dim: spec.dim,
        centroids: spec.centres(),
        offsets: partition.shard_offsets(rank),
        ids: rows.clone().map(|i| i as u32).collect(),
    };
    let first = rows.start;
    let lists = HostArray::from_rows(
        std::slice::from_ref(gpu),
        rows.len(),
        spec.dim,
        |at, out| spec.fill(&offsets, first + at, out),
    )?;
    Ok(Part { layout, lists })
}

//! One rank of the process run (`--rank`): it meets the others at rank 0's address, makes
//! its NCCL communicator from the id rank 0 hands out, generates only its own lists, and runs
//! the same batches as the in-process shards; rank 0 compares each answer with the
//! in-process one-GPU answer. Each rank leaves its measurements in a file of the run's
//! working folder, which the launching process reads.

use std::path::PathBuf;
use std::time::Duration;

use lookahead::{DriverContext, Gpu};
use lookahead_bench::output::OutDir;
use lookahead_ivf::gpu::{Reads, ShardIndex};
use lookahead_ivf::shard::ranks::RankSearch;
use lookahead_multi::{Communicator, Rendezvous, UniqueId};

use crate::build::{self, sizes, Size};
use crate::inproc::PINNED_BYTES;
use crate::report::{Answer, Cold, Measured};
use crate::run::run_rank;
use crate::{rates, Args, Res};

/// The working folder the ranks and the launching process share, below `--out`.
fn work_dir(out: &std::path::Path) -> PathBuf {
    out.join(".ivf_shards")
}

/// The arguments every rank gets as the launching process had them.
pub(crate) fn forwarded_args(a: &Args) -> Vec<String> {
    let pairs: [(&str, String); 13] = [
        ("--small-gib", a.small_gib.to_string()),
        ("--big-gib", a.big_gib.to_string()),
        ("--dim", a.dim.to_string()),
        ("--small-nlist", a.small_nlist.to_string()),
        ("--big-nlist", a.big_nlist.to_string()),
        ("--small-queries", a.small_queries.to_string()),
        ("--big-queries", a.big_queries.to_string()),
        ("--small-nprobe", a.small_nprobe.to_string()),
        ("--big-nprobe", a.big_nprobe.to_string()),
        ("--batches", a.batches.to_string()),
        ("--timeout-s", a.timeout_s.to_string()),
        ("--seed", a.seed.to_string()),
        ("--ranks", a.ranks.to_string()),
    ];
    pairs
        .into_iter()
        .flat_map(|(k, v)| [k.to_string(), v])
        .collect()
}

/// Writes the one-GPU answer of `size` for rank 0 of the process run.
pub(crate) fn write_reference(out: &OutDir, size: &Size, answer: &Answer) -> Res<()> {
    let dir = work_dir(out.path());
    std::fs::create_dir_all(&dir)?;
    let mut bytes = Vec::with_capacity(answer.0.len() * 8);
    bytes.extend(answer.0.iter().flat_map(|d| d.to_le_bytes()));
    bytes.extend(answer.1.iter().flat_map(|i| i.to_le_bytes()));
    std::fs::write(dir.join(format!("reference_{}.bin", size.name)), bytes)?;
    Ok(())
}

fn read_reference(out: &std::path::Path, size: &Size) -> Res<Answer> {
    let bytes = std::fs::read(work_dir(out).join(format!("reference_{}.bin", size.name)))?;
    let words: Vec<[u8; 4]> = bytes
        .chunks_exact(4)
        .map(|c| [c[0], c[1], c[2], c[3]])
        .collect();
    let half = words.len() / 2;
    Ok((
        words[..half]
            .iter()
            .map(|w| f32::from_le_bytes(*w))
            .collect(),
        words[half..]
            .iter()
            .map(|w| u32::from_le_bytes(*w))
            .collect(),
    ))
}

/// Rank `rank`'s whole run.
pub(crate) fn run(args: &Args, rank: usize) -> Res<()> {
    let world = args.gpus.len();
    let ordinal = *args.gpus.get(rank).ok_or("--rank beyond --gpus")?;
    let gpu = Gpu::new(ordinal)?;
    let timeout = Duration::from_secs(args.timeout_s);
    let addr = args
        .rendezvous
        .as_deref()
        .ok_or("--rank without --rendezvous")?;
    let session =
        Rendezvous::new(addr, world, rank, timeout)?.join(|| Ok(UniqueId::new()?.to_bytes()))?;
    let id = UniqueId::from_bytes(session.payload())?;
    gpu.bind_to_thread()?;
    let stream = gpu.context().new_stream().during("cuStreamCreate")?;
    let mut comm = Some(Communicator::init_rank(
        &gpu, &stream, &id, rank, world, timeout,
    )?);
    println!("rank {rank} of {world} on GPU {ordinal}: communicator ready");
    for size in sizes(args) {
        let build::Part { layout, lists } = build::part(args, &size, &gpu, rank, world)?;
        // Every rank copies at once, as the in-process measurement does.
        session.barrier()?;
        let pinned = rates::pinned_rate(&gpu, lists.host(), PINNED_BYTES, || ())?;
        session.barrier()?;
        let view = lists.view(&gpu, 0..lists.len())?;
        let shard = ShardIndex::new(&gpu, &stream, layout, view, Reads::Pull)?;
        let mut rs = RankSearch::new(shard, comm.take().expect("given back below"))?;
        let batch = (rank == 0).then(|| size.batch(args));
        let reference = match rank {
            0 => Some(read_reference(&args.out, &size)?),
            _ => None,
        };
        let run = run_rank(
            &mut rs,
            batch.as_ref(),
            &size,
            args.batches,
            reference.as_ref(),
        );
        comm = Some(rs.into_parts().1);
        let run = run?;
        let lines = [
            format!("pinned {pinned}"),
            format!("needed {}", run.cold_stats.needed_bytes),
            format!("cold {}", run.cold.wall),
            format!("warm {}", join(run.warm.iter().map(|t| t.wall))),
            format!("gather {}", join(run.warm.iter().map(|t| t.gather))),
            format!("merge {}", join(run.warm.iter().map(|t| t.host_merge))),
            format!("checked {}", run.checked),
            format!("same {}", run.same),
            format!("alone {}", run.all_gather_alone),
        ];
        let file = work_dir(&args.out).join(format!("rank{rank}_{}.txt", size.name));
        std::fs::write(file, lines.join("\n") + "\n")?;
        println!("rank {rank}: {} index done", size.name);
    }
    Ok(())
}

fn join(v: impl Iterator<Item = f64>) -> String {
    v.map(|x| x.to_string()).collect::<Vec<_>>().join(",")
}

/// The process run's measurements of `size`, from the ranks' files.
pub(crate) fn collect(out: &OutDir, size: &Size, world: usize) -> Res<Measured> {
    let mut pinned_sum = 0.0;
    let mut needed = 0u64;
    let mut m = Measured {
        mode: format!("NCCL all-gather, {world} processes"),
        gpus: world,
        ..Default::default()
    };
    let mut cold = 0.0;
    for r in 0..world {
        let path = work_dir(out.path()).join(format!("rank{r}_{}.txt", size.name));
        let text = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "rank {r} left no measurements of the {} index ({}): {e}",
                size.name,
                path.display()
            )
        })?;
        let field = |key: &str| -> Res<&str> {
            let prefix = format!("{key} ");
            let line = text.lines().find(|l| l.starts_with(&prefix));
            Ok(
                line.ok_or_else(|| format!("{}: no `{key}`", path.display()))?[prefix.len()..]
                    .trim(),
            )
        };
        let floats = |key: &str| -> Res<Vec<f64>> {
            field(key)?
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|s| Ok(s.parse::<f64>()?))
                .collect()
        };
        pinned_sum += field("pinned")?.parse::<f64>()?;
        needed += field("needed")?.parse::<u64>()?;
        if r == 0 {
            cold = field("cold")?.parse()?;
            m.warm = floats("warm")?;
            m.gather = floats("gather")?;
            m.host_merge = floats("merge")?;
            m.checked = field("checked")?.parse()?;
            m.same = field("same")?.parse()?;
            m.all_gather_alone = Some(field("alone")?.parse()?);
        }
    }
    m.cold = Some(Cold {
        seconds: cold,
        needed_bytes: needed,
        pinned_sum,
    });
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ranks_files_add_up_to_one_configuration() {
        let dir = std::env::temp_dir().join(format!("ivf_shards_collect_{}", std::process::id()));
        let out = OutDir::create(&dir).unwrap();
        let size = Size {
            name: "big",
            gib: 1.0,
            nlist: 8,
            queries: 100,
            nprobe: 2,
        };
        let work = work_dir(out.path());
        std::fs::create_dir_all(&work).unwrap();
        let rank0 = "pinned 50.5\nneeded 1000\ncold 0.25\nwarm 0.1,0.2\ngather 0.01,0.02\n\
                     merge 0.001,0.002\nchecked 4\nsame 3\nalone 0.00003\n";
        std::fs::write(work.join("rank0_big.txt"), rank0).unwrap();
        std::fs::write(work.join("rank1_big.txt"), "pinned 49.5\nneeded 3000\n").unwrap();
        let m = collect(&out, &size, 2).unwrap();
        let cold = m.cold.unwrap();
        assert_eq!(
            (cold.needed_bytes, cold.pinned_sum, cold.seconds),
            (4000, 100.0, 0.25)
        );
        assert_eq!((m.warm, m.checked, m.same), (vec![0.1, 0.2], 4, 3));
        assert_eq!(m.all_gather_alone, Some(0.00003));
        // A rank that left nothing is named.
        let e = collect(&out, &size, 3).unwrap_err().to_string();
        assert!(e.contains("rank 2 left no measurements"), "{e}");
        let answer = (vec![1.5f32, f32::INFINITY], vec![7u32, u32::MAX]);
        write_reference(&out, &size, &answer).unwrap();
        assert_eq!(read_reference(out.path(), &size).unwrap(), answer);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! The data set both sides search, written once for FAISS's side to read: the vectors in id
//! order, our trained centroids, the query pool, the cold and warm batches of each probed
//! fraction, the exact neighbours of the pool's first queries, and `meta.txt` with the
//! parameters and an FNV-1a checksum of every file, which `faiss_side` checks before it
//! reads a file (so both sides provably search the same bytes).

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::Path;

use lookahead_ivf::cpu;
use lookahead_ivf::data::{write_fvecs, Vectors};
use lookahead_ivf::workload::Batches;
use rayon::prelude::*;

/// FNV-1a (64-bit) of a byte stream: the function `faiss_side` recomputes.
#[derive(Debug, Clone, Copy)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    /// Adds `bytes` to the hash.
    pub fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// The hash so far.
    pub fn finish(self) -> u64 {
        self.0
    }

    /// The hash of a file's bytes.
    pub fn of_file(path: &Path) -> std::io::Result<u64> {
        let mut f = std::fs::File::open(path)?;
        let mut h = Fnv1a::default();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                return Ok(h.finish());
            }
            h.update(&buf[..n]);
        }
    }
}

/// What both sides search.
pub struct DataSet {
    /// Every index vector, in id order.
    pub base: Vectors,
    /// Our trained coarse centroids (FAISS's quantizer gets them too).
    pub centroids: Vectors,
    /// The query pool: latency batches and throughput searches take their queries from it.
    pub queries: Vectors,
    /// Per probed fraction, its name (`cold6` for 6%) and its cold and warm batches.
    pub cold_sets: Vec<(String, Batches)>,
    /// The exact 10 nearest ids of the pool's first queries (brute force on the CPU).
    pub exact: Vec<Vec<u32>>,
    /// Lists probed per query.
    pub nprobe: usize,
    /// Neighbours per query.
    pub k: usize,
}

/// The exact `k` nearest ids of `queries`' first `n` against `base` (brute force, all CPU
/// cores): the reference both sides' recall is measured against.
pub fn exact_neighbours(base: &Vectors, queries: &Vectors, n: usize, k: usize) -> Vec<Vec<u32>> {
    (0..n.min(queries.len()))
        .into_par_iter()
        .map(|q| {
            cpu::brute_force(base, queries.row(q), k)
                .into_iter()
                .map(|h| h.1)
                .collect()
        })
        .collect()
}

/// Writes `rows` (each `dim` 4-byte values) as `.ivecs`.
fn write_ivecs(path: &Path, dim: usize, rows: &[Vec<u32>]) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    for r in rows {
        f.write_all(&(dim as i32).to_le_bytes())?;
        for &x in r {
            f.write_all(&x.to_le_bytes())?;
        }
    }
    f.flush()
}

impl DataSet {
    /// Writes every file and `meta.txt` into `dir` (created if missing).
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let mut files = vec![
            ("base.fvecs".to_string(), &self.base),
            ("centroids.fvecs".to_string(), &self.centroids),
            ("queries.fvecs".to_string(), &self.queries),
        ];
        for (name, b) in &self.cold_sets {
            files.push((format!("{name}_a.fvecs"), &b.cold));
            files.push((format!("{name}_b.fvecs"), &b.warm));
        }
        let mut meta = String::new();
        let names: Vec<&str> = self.cold_sets.iter().map(|(n, _)| n.as_str()).collect();
        let _ = writeln!(
            meta,
            "dim={}\nn={}\nnlist={}\nnprobe={}\nk={}\ncold_sets={}",
            self.base.dim,
            self.base.len(),
            self.centroids.len(),
            self.nprobe,
            self.k,
            names.join(",")
        );
        for (name, v) in files {
            let path = dir.join(&name);
            write_fvecs(&path, v)?;
            let _ = writeln!(meta, "fnv1a.{name}={:x}", Fnv1a::of_file(&path)?);
        }
        let gt = dir.join("groundtruth.ivecs");
        write_ivecs(&gt, self.k, &self.exact)?;
        let _ = writeln!(meta, "fnv1a.groundtruth.ivecs={:x}", Fnv1a::of_file(&gt)?);
        std::fs::write(dir.join("meta.txt"), meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_its_published_test_vectors() {
        // From the FNV reference (draft-eastlake-fnv): "" and "a" and "foobar".
        let of = |s: &[u8]| {
            let mut h = Fnv1a::default();
            h.update(s);
            h.finish()
        };
        assert_eq!(of(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(of(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(of(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn the_written_files_hash_to_what_meta_says_and_read_back_equal() {
        let dir = std::env::temp_dir().join(format!("faiss-compare-{}", std::process::id()));
        let v = |n: usize, s: f32| Vectors {
            dim: 4,
            data: (0..n * 4).map(|i| i as f32 * s).collect(),
        };
        let ds = DataSet {
            base: v(10, 0.5),
            centroids: v(2, 1.5),
            queries: v(3, -0.25),
            cold_sets: vec![(
                "cold6".into(),
                Batches {
                    cold: v(2, 2.0),
                    warm: v(2, 3.0),
                },
            )],
            exact: exact_neighbours(&v(10, 0.5), &v(3, -0.25), 2, 3),
            nprobe: 1,
            k: 3,
        };
        ds.write(&dir).unwrap();
        let meta = std::fs::read_to_string(dir.join("meta.txt")).unwrap();
        assert!(
            meta.contains("nlist=2\n") && meta.contains("cold_sets=cold6\n"),
            "{meta}"
        );
        for name in ["base.fvecs", "cold6_b.fvecs", "groundtruth.ivecs"] {
            let h = Fnv1a::of_file(&dir.join(name)).unwrap();
            assert!(
                meta.contains(&format!("fnv1a.{name}={h:x}\n")),
                "{name}: {meta}"
            );
        }
        let back = lookahead_ivf::data::read_fvecs(&dir.join("base.fvecs"), usize::MAX).unwrap();
        assert_eq!(back, ds.base);
        // The nearest of base to query 0 (all coordinates -0, ...) is vector 0.
        assert_eq!(ds.exact[0][0], 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

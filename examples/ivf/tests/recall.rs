//! IVF recall on a small generated index, with the CPU scan (no GPU): the layout, k-means and
//! search must find most true neighbours, and scanning every list must find all of them.

use lookahead_ivf::cpu;
use lookahead_ivf::data::{read_fvecs, write_fvecs, Clusters};
use lookahead_ivf::index::IvfLayout;

fn small() -> (Clusters, lookahead_ivf::data::Vectors) {
    let spec = Clusters {
        dim: 16,
        clusters: 32,
        spread: 4.0,
        sigma: 1.0,
        seed: 7,
    };
    let data = spec.points(4000, 0, None);
    (spec, data)
}

#[test]
fn ivf_recall_at_10_on_a_small_index() {
    let (spec, data) = small();
    let sample = spec.points(2000, 1, None);
    let centroids = cpu::kmeans(&sample, 32, 10, 3);
    let assign = cpu::assign(&centroids, &data);
    let layout = IvfLayout::from_assignment(16, centroids, &assign);
    let mut lists = vec![0.0; data.data.len()];
    layout.scatter(&data, &mut lists);
    // Every vector is in exactly one list, and the lists hold exactly the data.
    assert_eq!(layout.len(), data.len());
    let mut ids = layout.ids.clone();
    ids.sort();
    assert!(ids.iter().enumerate().all(|(i, &id)| i as u32 == id));

    let queries = spec.points(50, 2, None);
    let exact: Vec<_> = (0..50)
        .map(|i| cpu::brute_force(&data, queries.row(i), 10))
        .collect();
    let probe4: Vec<_> = (0..50)
        .map(|i| cpu::search(&layout, &lists, queries.row(i), 4, 10))
        .collect();
    let all: Vec<_> = (0..50)
        .map(|i| cpu::search(&layout, &lists, queries.row(i), 32, 10))
        .collect();
    let r4 = cpu::recall(&probe4, &exact, 10);
    assert!(r4 >= 0.9, "recall@10 with nprobe=4 is {r4}");
    assert_eq!(
        cpu::recall(&all, &exact, 10),
        1.0,
        "scanning every list is exact"
    );
    // Recall never drops as nprobe grows.
    let probe1: Vec<_> = (0..50)
        .map(|i| cpu::search(&layout, &lists, queries.row(i), 1, 10))
        .collect();
    assert!(cpu::recall(&probe1, &exact, 10) <= r4);
}

#[test]
fn generation_is_deterministic_and_fvecs_round_trips() {
    let (spec, data) = small();
    assert_eq!(spec.points(4000, 0, None), data);
    assert_ne!(spec.points(4000, 1, None), data);
    let path = std::env::temp_dir().join(format!("lookahead-ivf-{}.fvecs", std::process::id()));
    write_fvecs(&path, &data).unwrap();
    assert_eq!(read_fvecs(&path, usize::MAX).unwrap(), data);
    assert_eq!(read_fvecs(&path, 10).unwrap().len(), 10);
    std::fs::write(&path, [3u8, 0, 0, 0, 1]).unwrap();
    assert!(
        read_fvecs(&path, usize::MAX).is_err(),
        "a truncated file is an error"
    );
    std::fs::remove_file(&path).ok();
}

#[test]
fn bytes_of_counts_each_list_once() {
    let layout = IvfLayout::from_assignment(2, vec![0.0; 6], &[0, 1, 1, 2, 2, 2]);
    assert_eq!(layout.offsets, [0, 1, 3, 6]);
    assert_eq!(layout.bytes_of(&[2, 2, 0]), (3 + 1) * 2 * 4);
}

//! The gather kernels on the CPU emulator, against the CPU reference on random inputs: every
//! row under plain reads and hints, GPU-driven requests served by a host service (and a
//! ring too small, with no service), and the GPU-driven pull copying each tile once.

use std::sync::Arc;
use std::time::Duration;

use lookahead::emu::Emulator;
use lookahead::launch::{HostMemory, LaunchConfig};
use lookahead_uvm::{PrefetchService, RequestRing, RingQueue, ServiceConfig};
use rand::rngs::StdRng;
use rand::SeedableRng;
use uvm_gather::{cpu_gather, first_mismatch, random_picks, random_table, Mismatch, Shape};
use uvm_gather_kernels::{
    GatheredArgs, PullArgs, TableArgs, HINT_L2, HINT_NONE, STATS, STAT_MOVED, STAT_READY,
    STAT_TIMED_OUT, STAT_WENT_AHEAD, THREADS,
};

/// A table of `shape`, `picks` random rows of it, and the CPU reference's output.
struct Inputs {
    shape: Shape,
    table: Vec<u32>,
    picks: Vec<u32>,
    want: Vec<u32>,
}

fn inputs(shape: Shape, picks: usize) -> Inputs {
    let seed = rand::random();
    println!("seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let table = random_table(shape, &mut rng);
    let picks = random_picks(picks, shape.rows, &mut rng);
    let want = cpu_gather(&table, shape.row_words, &picks);
    Inputs {
        shape,
        table,
        picks,
        want,
    }
}

/// 200 rows of 40 words (not a multiple of the warp), tiles of 8 rows.
fn small() -> Inputs {
    inputs(Shape::new(200, 40, 8).unwrap(), 300)
}

/// Four blocks: 32 warps, so each takes several rows.
fn grid() -> LaunchConfig {
    LaunchConfig::new((4, 1, 1), (THREADS, 1, 1))
}

/// What a launch wrote: the rows (poisoned first) and the counters.
struct Out {
    rows: Vec<u32>,
    stats: Vec<u32>,
}

impl Out {
    fn poisoned(inp: &Inputs) -> Out {
        Out {
            rows: vec![u32::MAX; inp.want.len()],
            stats: vec![0; STATS],
        }
    }

    fn args(&mut self) -> GatheredArgs<'_, HostMemory> {
        GatheredArgs {
            rows: &mut self.rows,
            stats: &mut self.stats,
        }
    }
}

fn table(inp: &Inputs) -> TableArgs<'_, HostMemory> {
    TableArgs {
        data: &inp.table,
        row_words: inp.shape.row_words as u32,
        tile_rows: inp.shape.tile_rows as u32,
    }
}

fn gather(inp: &Inputs, queue: RingQueue<'_, HostMemory>, hints: u32) -> Out {
    let mut out = Out::poisoned(inp);
    let emu = Emulator::new();
    uvm_gather_kernels::gather::launch(
        &emu,
        grid(),
        table(inp),
        &inp.picks,
        queue,
        hints,
        out.args(),
    )
    .unwrap();
    assert_eq!(
        first_mismatch(&out.rows, &inp.want, inp.shape.row_words),
        None
    );
    out
}

#[test]
fn gather_copies_every_row_with_and_without_hints() {
    let inp = small();
    for hints in [HINT_NONE, HINT_L2] {
        let out = gather(&inp, RingQueue::disabled(), hints);
        assert_eq!(
            out.stats, [0; STATS],
            "no queue: nothing asked or waited for"
        );
    }
}

#[test]
fn gather_waits_for_the_tiles_a_host_service_marks_ready() {
    let inp = small();
    let tiles = inp.shape.tiles_of(&inp.picks).len() as u32;
    let ring = Arc::new(RequestRing::in_host_memory(64, inp.shape.tiles() as u32));
    let serve = || {
        PrefetchService::start_on_host(ring.clone(), ServiceConfig::default(), Duration::ZERO)
            .unwrap()
    };
    let service = serve();
    let out = gather(&inp, ring.queue(Duration::from_secs(60)), HINT_NONE);
    let report = service.stop();
    let n = inp.picks.len() as u32;
    assert_eq!(out.stats[STAT_READY], n, "{:?}", out.stats);
    assert_eq!(out.stats[STAT_MOVED], tiles, "each tile asked for once");
    assert_eq!(report.requests, tiles as u64);
    // Nothing moved back since: the next launch asks for nothing and waits for nothing.
    let out = gather(&inp, ring.queue(Duration::from_secs(60)), HINT_NONE);
    assert_eq!(out.stats, [n, 0, 0, 0]);
    // After the host moved the data back, it asks again.
    ring.forget_resident();
    let service = serve();
    let out = gather(&inp, ring.queue(Duration::from_secs(60)), HINT_NONE);
    service.stop();
    assert_eq!(out.stats, [n, 0, 0, tiles]);
}

#[test]
fn a_full_ring_and_no_service_change_no_row() {
    let inp = small();
    let ring = RequestRing::in_host_memory(1, inp.shape.tiles() as u32);
    let out = gather(&inp, ring.queue(Duration::from_millis(1)), HINT_NONE);
    let s = &out.stats;
    assert_eq!(s[STAT_MOVED], 1, "one slot, one request: {s:?}");
    assert_eq!(s[STAT_READY], 0, "{s:?}");
    assert!(s[STAT_WENT_AHEAD] > 0 && s[STAT_TIMED_OUT] > 0, "{s:?}");
    assert_eq!(
        s[STAT_WENT_AHEAD] + s[STAT_TIMED_OUT],
        inp.picks.len() as u32
    );
}

/// The pull's state as the emulator's host memory: cache, per-tile counters and claims.
struct PullState {
    cache: Vec<u32>,
    counters: Vec<u32>,
    claims: Vec<u32>,
}

impl PullState {
    fn new(inp: &Inputs) -> PullState {
        PullState {
            cache: vec![u32::MAX; inp.table.len()],
            counters: vec![0; inp.shape.tiles()],
            claims: vec![0; inp.shape.tiles()],
        }
    }

    /// One `pull_gather` launch (the claims zeroed first, as the host does); its output.
    fn gather(&mut self, inp: &Inputs) -> Out {
        self.claims.fill(0);
        let mut out = Out::poisoned(inp);
        let pull = PullArgs {
            cache: &mut self.cache,
            counters: &mut self.counters,
            claims: &mut self.claims,
            wait_ns: 60_000_000_000,
        };
        let emu = Emulator::new();
        uvm_gather_kernels::pull_gather::launch(
            &emu,
            grid(),
            table(inp),
            &inp.picks,
            pull,
            out.args(),
        )
        .unwrap();
        out
    }
}

#[test]
fn the_pull_copies_each_tile_once_and_reads_its_cache() {
    // Tiles of 16 rows of 2100 words: three copy chunks each, the last one short.
    let inp = inputs(Shape::new(48, 2100, 16).unwrap(), 60);
    let picked = inp.shape.tiles_of(&inp.picks);
    let n = inp.picks.len() as u32;
    let mut pull = PullState::new(&inp);
    let out = pull.gather(&inp);
    assert_eq!(
        first_mismatch(&out.rows, &inp.want, inp.shape.row_words),
        None
    );
    assert_eq!(out.stats, [n, 0, 0, picked.len() as u32]);
    for t in 0..inp.shape.tiles() {
        let words = inp.shape.tile_words(t);
        let chunks = (words.len() * 4).div_ceil(64 << 10) as u32;
        if picked.contains(&t) {
            assert_eq!(pull.counters[t], chunks, "tile {t}");
            assert_eq!(pull.cache[words.clone()], inp.table[words], "tile {t}");
        } else {
            assert_eq!(pull.counters[t], 0, "tile {t} was not read");
        }
    }
    // Cached: the next launch copies nothing.
    let out = pull.gather(&inp);
    assert_eq!(
        first_mismatch(&out.rows, &inp.want, inp.shape.row_words),
        None
    );
    assert_eq!(out.stats, [n, 0, 0, 0]);
}

#[test]
fn a_cache_that_says_complete_without_the_data_is_caught() {
    // The negative control of the pull's check: counters that claim every tile copied
    // over a cache that holds none of it give rows that differ from the reference.
    let inp = small();
    let mut pull = PullState::new(&inp);
    pull.counters.fill(u32::MAX);
    let out = pull.gather(&inp);
    assert_eq!(out.stats[STAT_MOVED], 0);
    assert!(matches!(
        first_mismatch(&out.rows, &inp.want, inp.shape.row_words),
        Some(Mismatch::At { .. })
    ));
}

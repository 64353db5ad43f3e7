//! Asynchronous copies on the CPU emulator, in CI: the typed pipeline of each copy kind
//! against a CPU reference (copies landing at their wait and at random earlier points), the
//! raw instructions, and one report per misuse (a read before the wait, a write to a buffer
//! in flight, a refill racing a read, a wrong byte count either way, a missing arrive), each
//! naming the kernel, block and thread.

use lookahead::emu::{AsyncMisuse, EmuError, Emulator, Landing};
use lookahead::launch::LaunchConfig;
use lookahead::Error;
use ptx_kernels::pipeline as k;

/// `n` words, 16-byte aligned (as a GPU allocation is): what bulk copies need.
struct Aligned(Vec<[u32; 4]>, usize);

impl Aligned {
    fn new(words: impl IntoIterator<Item = u32>) -> Self {
        let v: Vec<u32> = words.into_iter().collect();
        let mut a = vec![[0u32; 4]; v.len().div_ceil(4)];
        for (i, w) in v.iter().enumerate() {
            a[i / 4][i % 4] = *w;
        }
        Aligned(a, v.len())
    }
    fn words(&self) -> &[u32] {
        // SAFETY: `[u32; 4]` is four `u32`s; `self.1 <= 4 * self.0.len()`.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast(), self.1) }
    }
}

fn inputs(n: usize, seed: u64) -> Aligned {
    let mut s = seed | 1;
    Aligned::new((0..n).map(|_| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s as u32
    }))
}

type SumLaunch = fn(&Emulator, LaunchConfig, &[u32], &mut Vec<u32>) -> lookahead::Result<()>;

#[test]
fn pipelined_sums_match_the_cpu_with_every_copy_kind_and_landing() {
    let kinds: [(&str, SumLaunch); 3] = [
        ("cp_async", |e, c, x, o| {
            k::pipe_sum_cp_async::launch(e, c, x, o)
        }),
        ("bulk", |e, c, x, o| k::pipe_sum_bulk::launch(e, c, x, o)),
        ("portable", |e, c, x, o| {
            k::pipe_sum_portable::launch(e, c, x, o)
        }),
    ];
    // A ragged last chunk, and blocks with 1, several and no chunks.
    let (n, blocks) = (k::STAGE * 9 + 100, 4usize);
    let x = inputs(n, 0x5eed);
    let want = k::pipe_sum_reference(x.words(), blocks);
    let cfg = LaunchConfig::grid_stride(blocks * 256, 256, blocks as u32);
    for landing in [
        Landing::AtWait,
        Landing::Early { seed: 1 },
        Landing::Early { seed: 2 },
    ] {
        let emu = Emulator::new().async_copy_landing(landing);
        for (name, launch) in kinds {
            let mut out = vec![u32::MAX; blocks * 256];
            launch(&emu, cfg, x.words(), &mut out).unwrap();
            assert_eq!(out, want, "{name}, {landing:?}");
        }
    }
}

#[test]
fn pipelined_loops_written_with_the_attribute_match_the_cpu() {
    // A short last chunk, still a multiple of 16 bytes (what bulk copies need).
    let (n, blocks) = (k::STAGE * 7 + 36, 3usize);
    let x = inputs(n, 0xa77);
    let want = k::pipe_sum_reference(x.words(), blocks);
    let cfg = LaunchConfig::grid_stride(blocks * 256, 256, blocks as u32);
    for landing in [Landing::AtWait, Landing::Early { seed: 5 }] {
        let emu = Emulator::new().async_copy_landing(landing);
        let mut out = vec![u32::MAX; blocks * 256];
        k::attr_sum_cp_async::launch(&emu, cfg, x.words(), &mut out).unwrap();
        assert_eq!(out, want, "cp_async, {landing:?}");
        let mut out = vec![u32::MAX; blocks * 256];
        k::attr_sum_portable::launch(&emu, cfg, x.words(), &mut out).unwrap();
        assert_eq!(out, want, "bulk_portable, {landing:?}");
    }
    let emu = Emulator::new();
    let mut out = vec![u32::MAX; blocks * 256];
    k::attr_sum_load_store::launch(&emu, cfg, x.words(), &mut out).unwrap();
    assert_eq!(out, want, "load_store");
    // Two targets, one of them gathered rows.
    let rows = 37;
    let table = inputs(rows * k::TWO_ROW, 4);
    let idx: Vec<u32> = (0..2 * rows as u32)
        .map(|i| (i * 7 + 3) % rows as u32)
        .collect();
    let mut out = vec![u32::MAX; rows * k::TWO_ROW];
    k::attr_two::launch(
        &Emulator::new(),
        LaunchConfig::grid_stride(64, 32, 2),
        table.words(),
        &idx,
        &mut out,
    )
    .unwrap();
    assert_eq!(out, k::attr_two_reference(table.words(), &idx));
}

#[test]
fn early_landings_show_a_source_overwritten_in_flight() {
    // Landing at the wait, the copy reads the overwritten source; landing early (some
    // seeds), the old one: a kernel whose result depends on it is wrong on a GPU.
    let landed = |landing| {
        let mut x = Aligned::new([0u32; 4]);
        let xs = x.0.as_mut_slice().as_flattened_mut();
        let mut out = vec![u32::MAX; 4];
        let emu = Emulator::new().async_copy_landing(landing);
        k::bug_source_written_in_flight::launch(&emu, LaunchConfig::for_len(32, 32), xs, &mut out)
            .unwrap();
        out[0]
    };
    assert_eq!(landed(Landing::AtWait), 1);
    let early: Vec<u32> = (0..16)
        .map(|seed| landed(Landing::Early { seed }))
        .collect();
    assert!(early.contains(&0) && early.contains(&1), "{early:?}");
}

#[test]
fn a_source_not_16_byte_aligned_is_copied_in_smaller_pieces() {
    // cp.async: 4-byte copies where the source is only 4-byte aligned.
    let x = inputs(k::STAGE * 3 + 1, 7);
    let shifted = &x.words()[1..];
    let mut out = vec![0u32; 2 * 256];
    let cfg = LaunchConfig::grid_stride(512, 256, 2);
    k::pipe_sum_cp_async::launch(&Emulator::new(), cfg, shifted, &mut out).unwrap();
    assert_eq!(out, k::pipe_sum_reference(shifted, 2));
    // A bulk copy cannot: its report names the requirement.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        k::pipe_sum_bulk::launch(&Emulator::new(), cfg, shifted, &mut out)
    }));
    let msg = panic_text(r.expect_err("a misaligned bulk copy must be refused"));
    assert!(msg.contains("kernel `pipe_sum_bulk`"), "{msg}");
    assert!(msg.contains("16-byte-aligned"), "{msg}");
}

#[test]
fn raw_instructions_copy_and_count_phases() {
    let x = inputs(64, 3);
    let w = x.words();
    let mut out = vec![u32::MAX; 20];
    k::raw_cp_async::launch(&Emulator::new(), LaunchConfig::for_len(32, 32), w, &mut out).unwrap();
    assert_eq!(out[..16], w[..16]);
    assert_eq!(out[16..], [w[16], w[17], w[18], 0], "zero fill");

    let mut seen = vec![0u32; 64];
    k::raw_mbarrier::launch(&Emulator::new(), LaunchConfig::for_len(64, 64), &mut seen).unwrap();
    assert!(seen.iter().all(|&s| s == 2), "{seen:?}");

    let mut out = vec![u32::MAX; 64];
    k::raw_bulk::launch(&Emulator::new(), LaunchConfig::for_len(64, 64), w, &mut out).unwrap();
    assert_eq!(out, w);
}

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// The launch's async-copy report: kernel, thread, misuse and text.
/// The error of a one-warp launch of a misuse kernel over four words.
fn one_warp_error(bug: SumLaunch) -> Error {
    let x = inputs(4, 1);
    let mut out = vec![0u32; 4];
    bug(
        &Emulator::new(),
        LaunchConfig::for_len(32, 32),
        x.words(),
        &mut out,
    )
    .unwrap_err()
}

fn async_report(e: Error) -> (&'static str, [u32; 3], AsyncMisuse, String) {
    let text = e.to_string();
    match e {
        Error::Emulator(inner) => match *inner {
            EmuError::AsyncCopy {
                kernel,
                thread,
                misuse,
                ..
            } => (kernel, thread, misuse, text),
            other => panic!("expected an asynchronous-copy report, got {other}"),
        },
        other => panic!("expected an emulator report, got {other}"),
    }
}

#[test]
fn reading_a_copy_before_its_wait_is_reported() {
    let e = one_warp_error(k::bug_read_before_wait::launch);
    let (kernel, thread, misuse, text) = async_report(e);
    assert_eq!((kernel, thread), ("bug_read_before_wait", [0, 0, 0]));
    assert_eq!(misuse, AsyncMisuse::ReadBeforeWait, "{text}");
    assert!(text.contains("block [0, 0, 0]"), "{text}");
    assert!(text.contains("cp.async.wait_group"), "{text}");
}

#[test]
fn writing_a_buffer_whose_copy_is_in_flight_is_reported() {
    let e = one_warp_error(k::bug_write_in_flight::launch);
    let (kernel, thread, misuse, text) = async_report(e);
    assert_eq!((kernel, thread), ("bug_write_in_flight", [1, 0, 0]));
    assert_eq!(misuse, AsyncMisuse::WriteInFlight, "{text}");
    assert!(text.contains("issued by thread 0"), "{text}");
}

#[test]
fn a_refill_racing_a_read_is_a_data_race() {
    let e = one_warp_error(k::bug_refill_without_barrier::launch);
    let text = e.to_string();
    let Error::Emulator(inner) = e else {
        panic!("{text}")
    };
    let EmuError::DataRace {
        kernel,
        kind,
        thread,
        ..
    } = *inner
    else {
        panic!("expected a data race, got {text}")
    };
    assert_eq!(
        (kernel, kind, thread),
        ("bug_refill_without_barrier", "write after read", [1, 0, 0]),
        "{text}"
    );
}

#[test]
fn a_wrong_expected_byte_count_is_reported_either_way() {
    let x = inputs(64, 1);
    for (bytes, announced, delivered) in [
        (256u32, 128u32, "delivered 256"),
        (128, 256, "delivered 128"),
    ] {
        let mut out = vec![0u32; 64];
        let e = k::bug_byte_count::launch(
            &Emulator::new(),
            LaunchConfig::for_len(64, 64),
            x.words(),
            &mut out,
            bytes,
            announced,
        )
        .unwrap_err();
        let (kernel, thread, misuse, text) = async_report(e);
        assert_eq!((kernel, thread), ("bug_byte_count", [0, 0, 0]), "{text}");
        assert_eq!(misuse, AsyncMisuse::ByteCount, "{text}");
        assert!(
            text.contains(&format!("announced {announced} bytes")) && text.contains(delivered),
            "{text}"
        );
    }
    // The negative control: the right count passes.
    let mut out = vec![0u32; 64];
    k::bug_byte_count::launch(
        &Emulator::new(),
        LaunchConfig::for_len(64, 64),
        x.words(),
        &mut out,
        256,
        256,
    )
    .unwrap();
    assert_eq!(out, x.words());
}

#[test]
fn a_missing_arrive_is_a_deadlock() {
    let mut out = vec![0u32; 128];
    let e =
        k::bug_missing_arrive::launch(&Emulator::new(), LaunchConfig::for_len(128, 128), &mut out)
            .unwrap_err();
    let text = e.to_string();
    let Error::Emulator(inner) = e else {
        panic!("{text}")
    };
    let EmuError::Deadlock {
        kernel,
        at_mbarrier,
        exited,
        ..
    } = *inner
    else {
        panic!("expected a deadlock, got {text}")
    };
    assert_eq!(kernel, "bug_missing_arrive");
    assert_eq!(at_mbarrier.0, (0..96).collect::<Vec<_>>(), "{text}");
    assert_eq!(exited.0, (96..128).collect::<Vec<_>>(), "{text}");
    assert!(
        text.contains("still expects 32 of its 128 arrivals"),
        "{text}"
    );
}

/// `stages = auto, copy = auto`: one entry per candidate pipeline and the plain one (loads
/// and stores), each matching the CPU, and the tuned launches running every entry in turn.
#[test]
fn a_pipeline_with_auto_stages_has_an_entry_per_candidate_and_each_matches_the_cpu() {
    use lookahead::launch::autotune::{CopyKind, Variant};
    let auto = k::attr_sum_auto::CANDIDATES;
    let mut want_candidates = vec![Variant::PLAIN];
    for copy in [CopyKind::CpAsync, CopyKind::BulkPortable] {
        want_candidates.extend((2..=4).map(|s| Variant::pipelined(copy, s)));
    }
    assert_eq!(auto, want_candidates.as_slice());
    let names: Vec<&str> = k::attr_sum_auto::ENTRIES.iter().map(|e| e.1).collect();
    assert_eq!(
        names,
        [
            "attr_sum_auto",
            "attr_sum_auto__cp_async_s2",
            "attr_sum_auto__cp_async_s3",
            "attr_sum_auto__cp_async_s4",
            "attr_sum_auto__bulk_portable_s2",
            "attr_sum_auto__bulk_portable_s3",
            "attr_sum_auto__bulk_portable_s4",
        ]
    );
    let (n, blocks) = (k::STAGE * 9 + 20, 3usize);
    let x = inputs(n, 0x5ea);
    let want = k::pipe_sum_reference(x.words(), blocks);
    let cfg = LaunchConfig::grid_stride(blocks * 256, 256, blocks as u32);
    let emu = Emulator::new().async_copy_landing(Landing::Early { seed: 9 });
    for v in auto {
        let mut out = vec![u32::MAX; blocks * 256];
        k::attr_sum_auto::launch_variant(*v, &emu, cfg, x.words(), &mut out).unwrap();
        assert_eq!(out, want, "{v}");
    }
    // Tuned launches on the emulator run each candidate once, then the first pipelined one.
    for _ in 0..auto.len() + 2 {
        let mut out = vec![u32::MAX; blocks * 256];
        k::attr_sum_auto::launch(&emu, cfg, x.words(), &mut out).unwrap();
        assert_eq!(out, want);
    }
    let e = k::attr_sum_auto::launch_variant(
        Variant::pipelined(CopyKind::Bulk, 3),
        &emu,
        cfg,
        x.words(),
        &mut vec![0u32; blocks * 256],
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("bulk_s3") && e.to_string().contains("cp_async_s2"),
        "{e}"
    );
}

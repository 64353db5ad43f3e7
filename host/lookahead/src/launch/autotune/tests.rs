use super::*;

fn cfg(samples: usize) -> AutoConfig {
    AutoConfig {
        samples,
        max_samples: samples,
        ..AutoConfig::default()
    }
}

const L2: Variant = Variant::new(Level::L2, 4);
const CANDIDATES: [Variant; 2] = [Variant::PLAIN, L2];

fn key(kernel: &'static str) -> TuneKey {
    TuneKey {
        device: 0,
        source: 1,
        kernel,
        shape: (256, 64),
        size_log2: 20,
        ptx_hash: 7,
    }
}

#[test]
fn tuner_plans_take_turns_per_kernel_and_decide_from_fed_timings() {
    let t = AutoTuner::new();
    t.set_config(cfg(1));
    let (a, b) = (key("a"), key("b"));
    let p = t.plan(a, &CANDIDATES);
    assert_eq!(
        (p.variant, p.measure, p.flush_l2),
        (Variant::PLAIN, Some(a), true)
    );
    t.launched(a, p.variant, None);
    assert_eq!(t.plan(a, &CANDIDATES).variant, L2);
    // Another kernel starts its own turns.
    assert_eq!(t.plan(b, &CANDIDATES).variant, Variant::PLAIN);
    // Untimed launches are counted but decide nothing.
    t.launched(a, L2, None);
    assert_eq!(t.choice(a), None);
    let s = t.status(a).unwrap();
    assert_eq!(s.launches, 2);
    assert!(s
        .candidates
        .iter()
        .all(|c| c.samples == 0 && c.launches == 1));
    // Timings come from events on a GPU; feed the selector directly here.
    feed(&t, a, 2.0, 1.0);
    assert_eq!(t.choice(a), Some(L2));
    assert_eq!(t.plan(a, &CANDIDATES), Plan::fixed(L2));
    t.forget("a");
    assert_eq!(t.choice(a), None);
    assert_eq!(t.status_all().len(), 1);
    t.reset();
    assert!(t.status_all().is_empty());
}

fn feed(t: &AutoTuner, key: TuneKey, plain: f32, hinted: f32) {
    let mut g = lock(&t.tunings);
    let sel = &mut g.get_mut(&key).unwrap().selector;
    sel.record(Variant::PLAIN, plain);
    sel.record(L2, hinted);
}

fn decide(t: &AutoTuner, key: TuneKey, plain: f32, hinted: f32) {
    for _ in 0..2 {
        let p = t.plan(key, &CANDIDATES);
        t.launched(key, p.variant, None);
    }
    feed(t, key, plain, hinted);
}

#[test]
fn a_second_tuner_on_the_same_file_takes_the_decision_without_tuning_launches() {
    let dir = std::env::temp_dir().join(format!("lookahead-autotune-{}", std::process::id()));
    let path = dir.join("autotune.tsv");
    let _ = std::fs::remove_dir_all(&dir);
    let key = TuneKey {
        shape: (256, 128),
        ptx_hash: 42,
        ..key("k")
    };
    let first = AutoTuner::with_store(DecisionStore::open(Some(path.clone())), Mode::Tune);
    first.set_config(cfg(1));
    decide(&first, key, 2.0, 1.0);
    let s = first.status(key).unwrap();
    assert_eq!((s.choice, s.origin), (Some(L2), Some(Origin::Measured)));
    assert_eq!(s.chosen_and_plain_ms(), (Some(1.0), Some(2.0)));

    // "The next process": a new tuner reading the same file.
    let second = AutoTuner::with_store(DecisionStore::open(Some(path.clone())), Mode::Tune);
    assert_eq!(second.plan(key, &CANDIDATES), Plan::fixed(L2));
    let s = second.status(key).unwrap();
    assert_eq!((s.origin, s.launches), (Some(Origin::Cached), 0));
    assert_eq!(s.chosen_and_plain_ms(), (Some(1.0), Some(2.0)));
    // Another shape, another PTX or another device is another decision.
    for other in [
        TuneKey {
            shape: (256, 256),
            ..key
        },
        TuneKey {
            ptx_hash: 43,
            ..key
        },
        TuneKey { device: 1, ..key },
        TuneKey {
            size_log2: 21,
            ..key
        },
    ] {
        assert!(
            second.plan(other, &CANDIDATES).measure.is_some(),
            "{other:?}"
        );
    }
    // A cached level the kernel no longer has is not trusted.
    let plain_only = [Variant::PLAIN, Variant::new(Level::Bulk, 0)];
    let third = AutoTuner::with_store(DecisionStore::open(Some(path.clone())), Mode::Tune);
    assert!(third.plan(key, &plain_only).measure.is_some());
    // Forgetting measures again, ignoring the file, and the new decision replaces it.
    second.forget("k");
    second.set_config(cfg(1));
    assert!(second.plan(key, &CANDIDATES).measure.is_some());
    decide(&second, key, 1.0, 2.0);
    assert_eq!(second.choice(key), Some(Variant::PLAIN));
    let fourth = AutoTuner::with_store(DecisionStore::open(Some(path)), Mode::Tune);
    assert_eq!(fourth.plan(key, &CANDIDATES), Plan::fixed(Variant::PLAIN));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_forced_mode_measures_nothing_and_falls_back_to_plain_without_the_level() {
    let forced = |v| AutoTuner::with_store(DecisionStore::open(None), Mode::Force(v));
    let t = forced(Variant::PLAIN);
    assert_eq!(t.plan(key("f"), &CANDIDATES), Plan::fixed(Variant::PLAIN));
    let s = t.status(key("f")).unwrap();
    assert_eq!((s.origin, s.launches), (Some(Origin::Forced), 0));
    let t = forced(Variant::new(Level::L2, 0));
    assert_eq!(
        t.plan(key("f"), &CANDIDATES),
        Plan::fixed(L2),
        "the kernel's distance"
    );
    let t = forced(Variant::new(Level::L2, 9));
    let nine = Variant::new(Level::L2, 9);
    assert_eq!(t.plan(key("f"), &CANDIDATES), Plan::fixed(nine));
    let t = forced(Variant::new(Level::Bulk, 2));
    assert_eq!(t.plan(key("f"), &CANDIDATES), Plan::fixed(Variant::PLAIN));
}

#[test]
fn a_forced_pipeline_is_launched_when_the_kernel_has_its_entry() {
    let (s2, s3) = (
        Variant::pipelined(CopyKind::CpAsync, 2),
        Variant::pipelined(CopyKind::CpAsync, 3),
    );
    let candidates = [Variant::PLAIN, s2, s3];
    let forced = |v| AutoTuner::with_store(DecisionStore::open(None), Mode::Force(v));
    // As `LOOKAHEAD_AUTOTUNE=cp_async_s3` names it.
    let t = forced(Variant::parse("cp_async_s3").unwrap());
    assert_eq!(t.plan(key("p"), &candidates), Plan::fixed(s3));
    let t = forced(Variant::pipelined(CopyKind::Bulk, 3));
    assert_eq!(t.plan(key("p"), &candidates), Plan::fixed(Variant::PLAIN));
}

#[test]
fn the_emulator_runs_each_candidate_once_hinted_first_then_the_first_hinted() {
    let t = AutoTuner::new();
    let c = [Variant::PLAIN, L2, Variant::new(Level::Bulk, 4)];
    let runs: Vec<Variant> = (0..5).map(|_| t.emulated(1, "e", &c)).collect();
    assert_eq!(runs, [c[1], c[2], c[0], c[1], c[1]]);
    assert_eq!(
        t.emulated(2, "e", &c),
        c[1],
        "another PTX table starts over"
    );
}

#[test]
fn shapes_bucket_blocks_by_powers_of_two() {
    let c = |g: u32, b: u32| LaunchConfig::new((g, 1, 1), (b, 1, 1));
    assert_eq!(shape_bucket(&c(264, 256)), (256, 512));
    assert_eq!(shape_bucket(&c(257, 256)), (256, 512));
    assert_eq!(shape_bucket(&c(256, 256)), (256, 256));
    assert_eq!(
        [
            size_bucket(0),
            size_bucket(1),
            size_bucket(1000),
            size_bucket(1024)
        ],
        [0, 0, 10, 10]
    );
    assert_eq!(
        shape_bucket(&LaunchConfig::new((4, 2, 1), (16, 16, 1))),
        (256, 8)
    );
}

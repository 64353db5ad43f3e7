//! Architecture compile errors, checked by building for the GPU: asking for a prefetch or
//! asynchronous-copy instruction (or a pipeline made of them) the target architecture lacks
//! must fail to compile with a message that names
//! the architecture needed (and, where there is one, the portable alternative), the same
//! source must build from that architecture on with the instruction in its PTX, and the
//! `portable` forms must build everywhere, falling back to `prefetch.global.L2`.
//!
//! trybuild compiles for the host, where these checks cannot fire, so this test builds the
//! fixture crates of `tests/arch-errors/` with `lookahead-builder` for sm_70, sm_80 and
//! sm_90, in the same `target/lookahead-ptx/sm_XX` directories as every build script (`core`
//! and the device runtime are already compiled there: each fixture build takes about a
//! second).
//!
//! It has its own `main` (`harness = false`), whose cases run under
//! `libtest-mimic`, which reads libtest's arguments (`--skip`, `--exact`, `--list`,
//! `--ignored`, `--test-threads N`, ...), so `cargo test --test arch_errors -- ARGS` means
//! what it means for any test; the cases run one at a time unless `--test-threads` says
//! otherwise (each is a nested build in the shared PTX target folders). Unlike libtest, a
//! name filter that matches no case is a failure, not an empty success.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use libtest_mimic::{Arguments, Failed, Trial};
use lookahead_builder::{ptx, Arch, BuildError, KernelBuilder};
use lookahead_tests::lines_inside_loops;

/// An instruction that one architecture has and older ones lack, asked for without
/// `portable`.
struct Needs {
    /// Fixture crate (`tests/arch-errors/<dir>`), one kernel in it.
    dir: &'static str,
    /// Its kernel.
    kernel: &'static str,
    /// The newest architecture without the instruction: the build must fail there.
    too_old: Arch,
    /// The first architecture with it: the build must succeed there.
    first: Arch,
    /// What the error message must say.
    message: &'static str,
    /// The alternative the message must suggest, if there is one.
    suggests: Option<&'static str>,
    /// For `#[prefetch_next]` errors (raised by the macro, so they have a span): the text at
    /// which the error must point in the fixture, as `--> path:line:column`.
    points_at: Option<&'static str>,
    /// The PTX instruction the build for `first` must contain.
    instruction: &'static str,
    /// Whether that instruction must sit inside a loop (the `#[prefetch_next]` forms).
    in_loop: bool,
}

static NEEDS: [Needs; 12] = [
    Needs {
        dir: "loop-bulk",
        kernel: "loop_bulk",
        too_old: Arch::SM_80,
        first: Arch::SM_90,
        message: "#[prefetch_next(level = bulk)] needs sm_90 (Hopper) or newer",
        suggests: Some("Add `portable` to fall back to per-line `prefetch.global.L2`"),
        points_at: Some("level = bulk)]"),
        instruction: "cp.async.bulk.prefetch.L2.global [",
        in_loop: true,
    },
    Needs {
        dir: "loop-l2-evict-last",
        kernel: "loop_evict_last",
        too_old: Arch::SM_70,
        first: Arch::SM_80,
        message: "#[prefetch_next(level = l2_evict_last)] needs sm_80 (Ampere) or newer",
        suggests: Some("Add `portable` to fall back to plain `prefetch.global.L2`"),
        points_at: Some("level = l2_evict_last)]"),
        instruction: "prefetch.global.L2::evict_last [",
        in_loop: true,
    },
    Needs {
        dir: "loop-l2-evict-normal",
        kernel: "loop_evict_normal",
        too_old: Arch::SM_70,
        first: Arch::SM_80,
        message: "#[prefetch_next(level = l2_evict_normal)] needs sm_80 (Ampere) or newer",
        suggests: Some("Add `portable` to fall back to plain `prefetch.global.L2`"),
        points_at: Some("level = l2_evict_normal)]"),
        instruction: "prefetch.global.L2::evict_normal [",
        in_loop: true,
    },
    Needs {
        dir: "bulk-prefetch-slice",
        kernel: "call_bulk_prefetch_slice",
        too_old: Arch::SM_80,
        first: Arch::SM_90,
        message: "bulk_prefetch_slice (cp.async.bulk.prefetch.L2.global) needs sm_90 (Hopper) or newer",
        suggests: Some("use bulk_prefetch_slice_portable"),
        points_at: None,
        instruction: "cp.async.bulk.prefetch.L2.global [",
        in_loop: false,
    },
    Needs {
        dir: "bulk-prefetch-l2",
        kernel: "call_bulk_prefetch_l2",
        too_old: Arch::SM_80,
        first: Arch::SM_90,
        message: "bulk_prefetch_l2 (cp.async.bulk.prefetch.L2.global) needs sm_90 (Hopper) or newer",
        suggests: Some("use bulk_prefetch_slice_portable"),
        points_at: None,
        instruction: "cp.async.bulk.prefetch.L2.global [",
        in_loop: false,
    },
    Needs {
        dir: "prefetch-l2-evict-last",
        kernel: "call_prefetch_l2_evict_last",
        too_old: Arch::SM_70,
        first: Arch::SM_80,
        message: "prefetch_l2_evict_last (prefetch.global.L2::evict_last) needs sm_80 (Ampere) or newer",
        suggests: Some("use prefetch_l2 on older GPUs"),
        points_at: None,
        instruction: "prefetch.global.L2::evict_last [",
        in_loop: false,
    },
    Needs {
        dir: "prefetch-l2-evict-normal",
        kernel: "call_prefetch_l2_evict_normal",
        too_old: Arch::SM_70,
        first: Arch::SM_80,
        message: "prefetch_l2_evict_normal (prefetch.global.L2::evict_normal) needs sm_80 (Ampere) or newer",
        suggests: Some("use prefetch_l2 on older GPUs"),
        points_at: None,
        instruction: "prefetch.global.L2::evict_normal [",
        in_loop: false,
    },
    Needs {
        dir: "pipeline-bulk",
        kernel: "pipeline_bulk",
        too_old: Arch::SM_80,
        first: Arch::SM_90,
        message: "a Pipeline with copy = Bulk (cp.async.bulk) needs sm_90 (Hopper) or newer",
        suggests: Some("use copy = BulkPortable"),
        points_at: None,
        instruction: "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [",
        in_loop: true,
    },
    Needs {
        dir: "pipeline-cp-async",
        kernel: "pipeline_cp_async",
        too_old: Arch::SM_70,
        first: Arch::SM_80,
        message: "a Pipeline with copy = CpAsync (cp.async) needs sm_80 (Ampere) or newer",
        suggests: Some("load tiles through registers"),
        points_at: None,
        instruction: "cp.async.cg.shared.global [",
        in_loop: true,
    },
    Needs {
        dir: "cp-async",
        kernel: "call_copy_cg",
        too_old: Arch::SM_70,
        first: Arch::SM_80,
        message: "copy_cg (cp.async.cg.shared.global) needs sm_80 (Ampere) or newer",
        suggests: Some("load and store through registers"),
        points_at: None,
        instruction: "cp.async.cg.shared.global [",
        in_loop: false,
    },
    Needs {
        dir: "mbarrier-expect-tx",
        kernel: "call_arrive_expect_tx",
        too_old: Arch::SM_80,
        first: Arch::SM_90,
        message: "MBarrier::arrive_expect_tx (mbarrier.arrive.expect_tx) needs sm_90 (Hopper) or newer",
        suggests: Some("cp_async::wait_group"),
        points_at: None,
        instruction: "mbarrier.arrive.expect_tx.shared::cta.b64 ",
        in_loop: false,
    },
    Needs {
        dir: "apply-priority-evict-normal",
        kernel: "call_apply_priority_evict_normal",
        too_old: Arch::SM_70,
        first: Arch::SM_80,
        message: "apply_priority_evict_normal (applypriority) needs sm_80 (Ampere) or newer",
        suggests: Some("leave the call out there"),
        points_at: None,
        instruction: "applypriority.global.L2::evict_normal [",
        in_loop: false,
    },
];

fn fixture(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("arch-errors")
        .join(dir)
}

/// Builds fixture `dir` for `arch` through `lookahead-builder`.
fn build(dir: &str, arch: Arch) -> Result<String, BuildError> {
    let mut builder = KernelBuilder::new(fixture(dir)).archs([arch]);
    // The directory build scripts use (`<target>/lookahead-ptx`, unless
    // LOOKAHEAD_PTX_TARGET_DIR says otherwise, which the builder then reads itself).
    if env::var_os("LOOKAHEAD_PTX_TARGET_DIR").is_none() {
        let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .expect("CARGO_TARGET_TMPDIR is <target>/tmp");
        builder = builder.target_dir(target.join("lookahead-ptx"));
    }
    let built = builder.build()?;
    let [one] = built.as_slice() else {
        panic!("asked for one architecture, got {} modules", built.len())
    };
    Ok(fs::read_to_string(&one.path).expect("reading the PTX the builder wrote"))
}

/// The compiler's error output for a build that must fail.
fn build_error(dir: &str, arch: Arch) -> Result<String, String> {
    match build(dir, arch) {
        Ok(_) => Err(format!(
            "{dir} built for {arch}, but must fail to compile there"
        )),
        Err(BuildError::ToolFailed { stderr, .. }) => Ok(stderr),
        Err(e) => Err(format!(
            "{dir} for {arch}: the build failed, but not with a compile error: {e}"
        )),
    }
}

/// The PTX of a build that must succeed.
fn build_ok(dir: &str, arch: Arch) -> Result<String, String> {
    build(dir, arch).map_err(|e| format!("{dir} must build for {arch}: {e}"))
}

/// The compile errors in cargo's output: `(headline, location)`, the location being the
/// `path:line:column` of the `-->` line right after the headline.
fn errors(stderr: &str) -> Vec<(String, Option<String>)> {
    let lines: Vec<&str> = stderr.lines().collect();
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("error") && !l.starts_with("error: could not compile"))
        .map(|(i, l)| {
            let location = lines
                .get(i + 1)
                .and_then(|n| n.trim_start().strip_prefix("--> "))
                .map(str::to_string);
            (l.to_string(), location)
        })
        .collect()
}

/// `tests/arch-errors/<dir>/src/lib.rs:line:column` of the first `needle` in the fixture
/// (where `#[prefetch_next]` errors point: the level's name).
fn location_of(dir: &str, needle: &str) -> String {
    let path = fixture(dir).join("src/lib.rs");
    let text = fs::read_to_string(&path).expect("reading the fixture");
    let (line, col) = text
        .lines()
        .enumerate()
        .find_map(|(i, l)| l.find(needle).map(|c| (i + 1, c + 1)))
        .unwrap_or_else(|| panic!("{needle:?} not in {}", path.display()));
    // The level name starts after "level = ".
    format!(
        "tests/arch-errors/{dir}/src/lib.rs:{line}:{}",
        col + "level = ".len()
    )
}

fn check(cond: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(what())
    }
}

/// Too old: the error names the architecture (and the alternative) and, for the macro,
/// points at the fixture; any other error is about the same architecture (the device
/// runtime's `bulk_prefetch_slice` also reports the `bulk_prefetch_l2` it calls). First
/// architecture with the instruction: it builds and the PTX has the instruction.
fn needs_case(n: &Needs) -> Result<(), String> {
    let stderr = build_error(n.dir, n.too_old)?;
    let errs = errors(&stderr);
    let (headline, location) = errs
        .iter()
        .find(|(h, _)| h.contains(n.message))
        .ok_or_else(|| {
            format!(
                "{} for {}: no error says {:?}:\n{stderr}",
                n.dir, n.too_old, n.message
            )
        })?;
    for (h, _) in &errs {
        check(h.contains(&format!("needs {}", n.first)), || {
            format!(
                "{} for {}: an error that does not name {}: {h}\n{stderr}",
                n.dir, n.too_old, n.first
            )
        })?;
    }
    if let Some(alt) = n.suggests {
        check(headline.contains(alt), || {
            format!("the error does not suggest {alt:?}:\n{stderr}")
        })?;
    }
    if let Some(needle) = n.points_at {
        let want = location_of(n.dir, needle);
        check(location.as_deref() == Some(want.as_str()), || {
            format!("the error should point at {want}, points at {location:?}:\n{stderr}")
        })?;
    }

    let text = build_ok(n.dir, n.first)?;
    let body = ptx::entry_body(&text, n.kernel)
        .ok_or_else(|| format!("{} for {}: no entry {}", n.dir, n.first, n.kernel))?;
    check(body.contains(n.instruction), || {
        format!(
            "{} for {}: {} lacks {:?}:\n{body}",
            n.dir, n.first, n.kernel, n.instruction
        )
    })?;
    if n.in_loop {
        check(!lines_inside_loops(body, n.instruction).is_empty(), || {
            format!(
                "{} for {}: {:?} is not inside the loop:\n{body}",
                n.dir, n.first, n.instruction
            )
        })?;
    }
    Ok(())
}

const BULK: &str = "cp.async.bulk.prefetch.L2.global [";
const EVICT_LAST: &str = "prefetch.global.L2::evict_last [";
const L2: &str = "prefetch.global.L2 [";

/// The `portable` forms build for every architecture: the instruction from the architecture
/// that has it, `prefetch.global.L2` (inside the loop) below it.
/// A plain helper with `format!` compiles on the host (and runs on the emulator); its GPU
/// build fails, and the builder says why in the DSL's words.
fn std_helper_case() -> Result<(), String> {
    let err = match build("std-in-helper", Arch::SM_80) {
        Ok(_) => return Err("std-in-helper built for the GPU".into()),
        Err(e) => e.to_string(),
    };
    check(
        err.contains("cannot find macro `format`")
            && err.contains("kernel code is `no_std` on the GPU")
            && err.contains("#[device_fn]"),
        || format!("std-in-helper: expected rustc's error and the builder's reason:\n{err}"),
    )
}

fn portable_case(arch: Arch) -> Result<(), String> {
    let text = build_ok("portable", arch)?;
    let body = |kernel: &str| {
        ptx::entry_body(&text, kernel).ok_or_else(|| format!("portable for {arch}: no {kernel}"))
    };
    let has_bulk = arch >= Arch::SM_90;
    let has_evict_last = arch >= Arch::SM_80;
    let cases = [
        ("loop_bulk_portable", BULK, has_bulk, true),
        ("loop_evict_last_portable", EVICT_LAST, has_evict_last, true),
        ("call_bulk_prefetch_slice_portable", BULK, has_bulk, false),
    ];
    for (kernel, instruction, native, in_loop) in cases {
        let body = body(kernel)?;
        let want = if native { instruction } else { L2 };
        let placed = if in_loop {
            !lines_inside_loops(body, want).is_empty()
        } else {
            body.contains(want)
        };
        check(placed, || {
            format!("{kernel} for {arch}: expected {want:?}{}:\n{body}", {
                if in_loop {
                    " inside the loop"
                } else {
                    ""
                }
            })
        })?;
        check(native || !body.contains(instruction), || {
            format!("{kernel} for {arch} must not contain {instruction:?}:\n{body}")
        })?;
    }
    Ok(())
}

/// The harness itself, run as a child with `args`: its exit status and what it printed.
fn harness(args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(env::current_exe().expect("the test executable"))
        .args(args)
        .output()
        .expect("running the harness");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (
        out.status.success(),
        text + &String::from_utf8_lossy(&out.stderr),
    )
}

/// libtest's arguments mean here what they mean for any test binary: listing (with and
/// without `--test-threads`), `--skip`, a name filter, `--exact`; and a filter that matches
/// no case fails.
fn arguments_case() -> Result<(), String> {
    let listed = |args: &[&str]| {
        let (ok, text) = harness(args);
        let names = text.lines().filter(|l| l.ends_with(": test")).count();
        (ok, names, text)
    };
    // The NEEDS cases, three `portable` ones, the std helper and this one.
    let all = NEEDS.len() + 3 + 2;
    for (args, want) in [
        (&["--list"][..], all),
        (&["--list", "--test-threads", "1"], all),
        (&["--list", "--test-threads=1"], all),
        (&["--list", "--skip", "portable"], all - 3),
        (&["--list", "portable"], 3),
        (&["--list", "--exact", "portable_builds_for_sm_70"], 1),
    ] {
        let (ok, names, text) = listed(args);
        check(ok && names == want, || {
            format!("{args:?}: {names} cases listed, want {want}:\n{text}")
        })?;
    }
    let (ok, text) = harness(&["no_case_is_called_this"]);
    check(!ok && text.contains("matches no test"), || {
        format!("a filter that matches nothing must fail:\n{text}")
    })
}

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    args.test_threads.get_or_insert(1);
    let mut trials: Vec<Trial> = NEEDS
        .iter()
        .map(|n| {
            let name = format!(
                "needs_{}_{}_fails_on_{}",
                n.dir.replace('-', "_"),
                n.first,
                n.too_old
            );
            Trial::test(name, move || needs_case(n).map_err(Failed::from))
        })
        .collect();
    for arch in [Arch::SM_70, Arch::SM_80, Arch::SM_90] {
        trials.push(Trial::test(
            format!("portable_builds_for_{arch}"),
            move || portable_case(arch).map_err(Failed::from),
        ));
    }
    trials.push(Trial::test(
        "a_helper_using_std_fails_the_gpu_build_with_the_reason",
        || std_helper_case().map_err(Failed::from),
    ));
    trials.push(Trial::test("harness_reads_libtest_arguments", || {
        arguments_case().map_err(Failed::from)
    }));
    let total = trials.len() as u64;
    let conclusion = libtest_mimic::run(&args, trials);
    if let Some(filter) = args.filter.as_deref().filter(|_| !args.list) {
        if conclusion.num_filtered_out == total {
            eprintln!("error: the filter {filter:?} matches no test of arch_errors");
            return ExitCode::FAILURE;
        }
    }
    conclusion.exit_code()
}

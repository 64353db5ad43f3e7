//! Rank processes started together: a run ends at the first rank that fails, is killed or
//! hangs, with an error naming it, and the other ranks do not outlive it.

use std::process::Command;
use std::time::{Duration, Instant};

use lookahead_multi::launcher::run_ranks;
use lookahead_multi::Error;

/// Rank `r` runs `scripts[r]` in `sh` (`exec` where the script waits, so that killing the
/// rank kills the waiting program, not a shell whose child keeps the output open).
fn sh(scripts: &'static [&'static str]) -> impl Fn(usize) -> Command {
    move |r| {
        let mut c = Command::new("sh");
        c.args(["-c", scripts[r]]);
        c
    }
}

fn failed(e: Error) -> (usize, String) {
    match e {
        Error::RankFailed { rank, detail } => (rank, detail),
        other => panic!("not a rank failure: {other}"),
    }
}

#[test]
fn ranks_that_all_succeed_end_the_run_cleanly() {
    for world in 1..=8 {
        run_ranks(world, Duration::from_secs(30), |r| {
            let mut c = Command::new("sh");
            c.args(["-c", &format!("echo rank {r} here")]);
            c
        })
        .unwrap();
    }
}

#[test]
fn a_rank_that_fails_is_named_and_the_others_are_killed() {
    let started = Instant::now();
    let e = run_ranks(
        3,
        Duration::from_secs(60),
        sh(&["exec sleep 30", "echo boom >&2; exit 3", "exec sleep 30"]),
    )
    .unwrap_err();
    let (rank, detail) = failed(e);
    assert_eq!(rank, 1);
    assert!(detail.contains("exited with status 3"), "{detail}");
    assert!(detail.contains("boom"), "{detail}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the sleeping ranks were waited for"
    );
}

#[test]
fn a_rank_killed_by_a_signal_is_named() {
    let e = run_ranks(
        2,
        Duration::from_secs(60),
        sh(&["exec sleep 30", "kill -9 $$"]),
    )
    .unwrap_err();
    let (rank, detail) = failed(e);
    assert_eq!(rank, 1);
    assert!(detail.contains("killed by signal 9"), "{detail}");
}

#[test]
fn ranks_that_hang_are_named_when_the_time_is_up() {
    let started = Instant::now();
    let e = run_ranks(
        2,
        Duration::from_millis(500),
        sh(&["exec sleep 30", "exec sleep 30"]),
    )
    .unwrap_err();
    let (rank, detail) = failed(e);
    assert_eq!(rank, 0);
    assert!(
        detail.contains("hung") && detail.contains("ranks 0, 1"),
        "{detail}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn a_rank_that_cannot_start_is_named() {
    let e = run_ranks(2, Duration::from_secs(10), |r| {
        Command::new(if r == 1 { "/nonexistent/rank" } else { "true" })
    })
    .unwrap_err();
    let (rank, detail) = failed(e);
    assert_eq!(rank, 1);
    assert!(detail.contains("could not be started"), "{detail}");
}

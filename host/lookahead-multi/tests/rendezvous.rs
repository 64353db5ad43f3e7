//! The TCP rendezvous on loopback: ranks in threads and in processes of their own, and every
//! way a rank can fail to show up, each ending in an error that names the rank.

use std::net::TcpListener;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use lookahead_multi::{Error, Rendezvous};

/// A loopback address nothing listens on (yet).
fn free_addr() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    format!("127.0.0.1:{}", l.local_addr().unwrap().port())
}

fn payload() -> Vec<u8> {
    (0..128u32).map(|i| (i * 7 + 3) as u8).collect()
}

/// Runs `ranks` (a subset of `0..world`) in threads; each returns its payload after a
/// barrier, or its error.
fn join_ranks(
    addr: &str,
    world: usize,
    ranks: &[usize],
    timeout: Duration,
) -> Vec<Result<Vec<u8>, Error>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = ranks
            .iter()
            .map(|&r| {
                s.spawn(move || {
                    let session =
                        Rendezvous::new(addr, world, r, timeout)?.join(|| Ok(payload()))?;
                    session.barrier()?;
                    Ok(session.payload().to_vec())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn detail(e: &Error) -> (usize, String) {
    match e {
        Error::Rendezvous { rank, detail, .. } => (*rank, detail.clone()),
        other => panic!("not a rendezvous error: {other}"),
    }
}

#[test]
fn every_rank_gets_rank_zeros_payload_for_one_to_eight_ranks() {
    for world in 1..=8 {
        let all: Vec<usize> = (0..world).collect();
        let got = join_ranks(&free_addr(), world, &all, Duration::from_secs(20));
        for (r, g) in got.into_iter().enumerate() {
            assert_eq!(g.unwrap(), payload(), "rank {r} of {world}");
        }
    }
}

#[test]
fn rank_zero_names_the_ranks_that_never_connect() {
    let started = Instant::now();
    let got = join_ranks(&free_addr(), 5, &[0, 1, 3], Duration::from_millis(800));
    let (rank, why) = detail(got[0].as_ref().unwrap_err());
    assert_eq!(rank, 0);
    assert!(why.contains("ranks 2, 4 of 5 did not connect"), "{why}");
    // The ranks that joined learn it too, and nobody waits much past the time limit.
    for g in &got[1..] {
        let (_, why) = detail(g.as_ref().unwrap_err());
        assert!(why.contains("rank 0 did not send the payload"), "{why}");
    }
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_rank_says_when_rank_zero_cannot_be_reached() {
    let got = join_ranks(&free_addr(), 2, &[1], Duration::from_millis(300));
    let (rank, why) = detail(got[0].as_ref().unwrap_err());
    assert_eq!(rank, 1);
    assert!(why.contains("rank 0 could not be reached"), "{why}");
}

#[test]
fn two_processes_given_one_rank_are_refused() {
    let addr = free_addr();
    let got = std::thread::scope(|s| {
        let zero = s.spawn(|| {
            Rendezvous::new(addr.as_str(), 3, 0, Duration::from_secs(5))?.join(|| Ok(payload()))
        });
        std::thread::sleep(Duration::from_millis(100));
        let a = s.spawn(|| {
            Rendezvous::new(addr.as_str(), 3, 1, Duration::from_secs(5))?.join(|| Ok(vec![]))
        });
        std::thread::sleep(Duration::from_millis(100));
        let b = s.spawn(|| {
            Rendezvous::new(addr.as_str(), 3, 1, Duration::from_secs(5))?.join(|| Ok(vec![]))
        });
        let _ = (a.join(), b.join());
        zero.join().unwrap()
    });
    let (rank, why) = detail(&got.unwrap_err());
    assert_eq!(rank, 0);
    assert!(why.contains("rank 1 joined twice"), "{why}");
}

#[test]
fn a_rank_of_another_run_is_refused() {
    let addr = free_addr();
    let got = std::thread::scope(|s| {
        let zero = s.spawn(|| {
            Rendezvous::new(addr.as_str(), 2, 0, Duration::from_secs(5))?.join(|| Ok(payload()))
        });
        let other = s.spawn(|| {
            Rendezvous::new(addr.as_str(), 3, 1, Duration::from_secs(2))?.join(|| Ok(vec![]))
        });
        let _ = other.join();
        zero.join().unwrap()
    });
    let (_, why) = detail(&got.unwrap_err());
    assert!(why.contains("claims rank 1 of 3"), "{why}");
}

#[test]
fn ranks_outside_the_world_are_refused_before_any_network() {
    let e = Rendezvous::new("127.0.0.1:1", 2, 2, Duration::from_secs(1)).unwrap_err();
    assert!(matches!(e, Error::Invalid(_)), "{e}");
}

/// A rank in a process of its own: this test binary run again with the rank's orders in its
/// environment (see `rank_process`).
fn spawn_rank(addr: &str, mode: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "rank_process", "--nocapture", "--test-threads=1"])
        .env("LOOKAHEAD_RV_ADDR", addr)
        .env("LOOKAHEAD_RV_MODE", mode)
        .spawn()
        .unwrap()
}

/// The body of a rank process (does nothing in a normal test run): joins as rank 1 of 2,
/// then exits at once (`exit`) or hangs (`hang`) instead of reaching the barrier.
#[test]
fn rank_process() {
    let (Ok(addr), Ok(mode)) = (
        std::env::var("LOOKAHEAD_RV_ADDR"),
        std::env::var("LOOKAHEAD_RV_MODE"),
    ) else {
        return;
    };
    let session = Rendezvous::new(addr.as_str(), 2, 1, Duration::from_secs(20))
        .unwrap()
        .join(|| Ok(vec![]))
        .unwrap();
    assert_eq!(session.payload(), payload());
    if mode == "hang" {
        std::thread::sleep(Duration::from_secs(60));
    }
    std::process::exit(0);
}

#[test]
fn a_rank_process_that_exits_is_named_at_the_barrier() {
    let addr = free_addr();
    let mut child = spawn_rank(&addr, "exit");
    let session = Rendezvous::new(addr.as_str(), 2, 0, Duration::from_secs(20))
        .unwrap()
        .join(|| Ok(payload()))
        .unwrap();
    let (rank, why) = detail(&session.barrier().unwrap_err());
    assert_eq!(rank, 0);
    assert!(
        why.contains("rank 1 (its connection closed: it exited)"),
        "{why}"
    );
    child.wait().unwrap();
}

#[test]
fn a_rank_process_that_hangs_is_named_at_the_barrier() {
    let addr = free_addr();
    let mut child = spawn_rank(&addr, "hang");
    let session = Rendezvous::new(addr.as_str(), 2, 0, Duration::from_secs(20))
        .unwrap()
        .join(|| Ok(payload()))
        .unwrap();
    let started = Instant::now();
    let err = session
        .barrier_within(Duration::from_millis(500))
        .unwrap_err();
    let (rank, why) = detail(&err);
    assert_eq!(rank, 0);
    assert!(why.contains("rank 1 (no answer within the time)"), "{why}");
    assert!(started.elapsed() < Duration::from_secs(5));
    child.kill().unwrap();
    child.wait().unwrap();
}

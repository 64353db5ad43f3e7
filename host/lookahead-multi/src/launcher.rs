//! Rank processes on this host: started together, their output prefixed with their rank, and
//! supervised, so that a rank that fails, is killed or hangs ends the whole run at once with
//! an error naming it (the others are killed, never left waiting on a collective).
//!
//! Across hosts, a job launcher (`ssh`, Slurm, Kubernetes) starts the ranks instead; each
//! rank runs the same program with its rank, the world size and rank 0's address, exactly
//! as [`run_ranks`] starts them here.
//!
//! ```no_run
//! use std::process::Command;
//! use std::time::Duration;
//!
//! let exe = std::env::current_exe().unwrap();
//! lookahead_multi::launcher::run_ranks(2, Duration::from_secs(600), |rank| {
//!     let mut c = Command::new(&exe);
//!     c.args(["--rank", &rank.to_string()]);
//!     c
//! })?;
//! # Ok::<(), lookahead_multi::Error>(())
//! ```

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Lines of a rank's error output kept for the report of its failure.
const TAIL_LINES: usize = 20;
/// How often the supervisor looks at the ranks.
const POLL: Duration = Duration::from_millis(20);

/// The last lines a rank wrote to its error output.
type Tail = Arc<Mutex<VecDeque<String>>>;

/// One running rank.
struct Rank {
    rank: usize,
    child: Child,
    tail: Tail,
    forwarders: Vec<JoinHandle<()>>,
}

/// Starts `world` ranks (`command(rank)` each), forwards their output line by line as
/// `[rank r] ...`, and waits for all of them. The first rank to exit with a failure (or by a
/// signal) ends the run: the others are killed and [`Error::RankFailed`] names it, with its
/// status and last lines of error output. Ranks still running after `timeout` are killed and
/// named as hung.
pub fn run_ranks(
    world: usize,
    timeout: Duration,
    command: impl Fn(usize) -> Command,
) -> Result<()> {
    if world == 0 {
        return Err(Error::Invalid("a run of 0 ranks".into()));
    }
    let mut ranks = Vec::with_capacity(world);
    for rank in 0..world {
        match spawn(rank, command(rank)) {
            Ok(r) => ranks.push(r),
            Err(e) => {
                kill_all(&mut ranks);
                return Err(e);
            }
        }
    }
    let outcome = supervise(&mut ranks, timeout);
    kill_all(&mut ranks);
    outcome
}

fn spawn(rank: usize, mut command: Command) -> Result<Rank> {
    // The ranks stay in this process's group: whatever ends the launching process's group
    // (a job system's time limit, `timeout`) ends them too.
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().map_err(|e| Error::RankFailed {
        rank,
        detail: format!("could not be started ({command:?}): {e}"),
    })?;
    let tail = Tail::default();
    let mut forwarders = Vec::new();
    if let Some(out) = child.stdout.take() {
        forwarders.push(forward(rank, out, None));
    }
    if let Some(err) = child.stderr.take() {
        forwarders.push(forward(rank, err, Some(tail.clone())));
    }
    Ok(Rank {
        rank,
        child,
        tail,
        forwarders,
    })
}

/// A thread copying `from` line by line to this process's output (stderr when `tail` is
/// given, keeping the last lines there too), each line prefixed with the rank.
fn forward(rank: usize, from: impl Read + Send + 'static, tail: Option<Tail>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            match &tail {
                Some(t) => {
                    eprintln!("[rank {rank}] {line}");
                    let mut t = t.lock().unwrap_or_else(|p| p.into_inner());
                    if t.len() == TAIL_LINES {
                        t.pop_front();
                    }
                    t.push_back(line);
                }
                None => println!("[rank {rank}] {line}"),
            }
        }
    })
}

/// Waits until every rank has exited successfully, or returns the first failure.
fn supervise(ranks: &mut [Rank], timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut done = vec![false; ranks.len()];
    while done.iter().any(|d| !d) {
        for (i, r) in ranks.iter_mut().enumerate() {
            if done[i] {
                continue;
            }
            let status = r.child.try_wait().map_err(|e| Error::RankFailed {
                rank: r.rank,
                detail: format!("its status could not be read: {e}"),
            })?;
            if let Some(status) = status {
                done[i] = true;
                if !status.success() {
                    // Its output up to the exit, for the report.
                    for f in r.forwarders.drain(..) {
                        let _ = f.join();
                    }
                    return Err(Error::RankFailed {
                        rank: r.rank,
                        detail: failure_detail(status, &r.tail),
                    });
                }
            }
        }
        if Instant::now() >= deadline {
            let hung: Vec<String> = ranks
                .iter()
                .zip(&done)
                .filter(|(_, d)| !**d)
                .map(|(r, _)| r.rank.to_string())
                .collect();
            let first = ranks.iter().zip(&done).find(|(_, d)| !**d);
            return Err(Error::RankFailed {
                rank: first.map_or(0, |(r, _)| r.rank),
                detail: format!(
                    "still running after {:.0} s (hung); ranks {} killed",
                    timeout.as_secs_f64(),
                    hung.join(", ")
                ),
            });
        }
        std::thread::sleep(POLL);
    }
    for r in ranks.iter_mut() {
        for f in r.forwarders.drain(..) {
            let _ = f.join();
        }
    }
    Ok(())
}

/// `exited with status 3` or `killed by signal 9`, then the last lines of error output.
fn failure_detail(status: ExitStatus, tail: &Tail) -> String {
    use std::os::unix::process::ExitStatusExt;
    let how = match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => format!("ended: {status}"),
    };
    let tail = tail.lock().unwrap_or_else(|p| p.into_inner());
    if tail.is_empty() {
        how
    } else {
        let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
        format!("{how}; its last error output:\n  {}", lines.join("\n  "))
    }
}

/// Kills the ranks still running (each by its own handle) and reaps them.
fn kill_all(ranks: &mut [Rank]) {
    for r in ranks.iter_mut() {
        if matches!(r.child.try_wait(), Ok(None)) {
            let _ = r.child.kill();
        }
        let _ = r.child.wait();
        for f in r.forwarders.drain(..) {
            let _ = f.join();
        }
    }
}

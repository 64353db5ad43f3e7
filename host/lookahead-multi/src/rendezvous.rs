//! How ranks find each other: rank 0 listens on a TCP address that every rank is given, the
//! others connect to it, and rank 0 hands each the same payload (an NCCL unique id) once all
//! have joined. The same code runs on loopback and across hosts; nothing else is shared.
//!
//! Every wait is bounded. Rank 0 names the ranks that did not connect in time, a rank that
//! cannot reach rank 0 says so, and a connection that closes names its rank. The connections
//! stay open as a [`Session`] whose [`Session::barrier`] finds a rank that exited (its
//! connection closes) or hangs (it does not arrive in time), by rank.
//!
//! The wire format, all integers little-endian: a rank says `LKRV`, the protocol version
//! (u32), the world size (u32) and its rank (u32); rank 0 answers `LKOK`, the payload's
//! length (u32) and the payload. A barrier is one byte each way.
//!
//! ```no_run
//! use std::time::Duration;
//! use lookahead_multi::rendezvous::Rendezvous;
//!
//! let (rank, world) = (0, 2);
//! let rv = Rendezvous::new("127.0.0.1:29400", world, rank, Duration::from_secs(30))?;
//! let session = rv.join(|| Ok(b"the id".to_vec()))?; // rank 0 makes it, the others receive it
//! assert_eq!(session.payload(), b"the id");
//! session.barrier()?;
//! # Ok::<(), lookahead_multi::Error>(())
//! ```

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

const HELLO: &[u8; 4] = b"LKRV";
const WELCOME: &[u8; 4] = b"LKOK";
const VERSION: u32 = 1;
/// Largest payload accepted (an NCCL unique id is 128 bytes).
const MAX_PAYLOAD: usize = 1 << 20;
/// How often waiting loops look again.
const POLL: Duration = Duration::from_millis(10);

/// Where and as what one rank joins a run.
#[derive(Debug, Clone)]
pub struct Rendezvous {
    addr: SocketAddr,
    world: usize,
    rank: usize,
    timeout: Duration,
}

/// The joined run: the payload, and the connections (rank 0: one per other rank, by rank;
/// others: the one to rank 0), kept for [`Session::barrier`].
#[derive(Debug)]
pub struct Session {
    rendezvous: Rendezvous,
    payload: Vec<u8>,
    /// Rank 0: `peers[r - 1]` is rank `r`'s connection. Others: one connection to rank 0.
    peers: Vec<TcpStream>,
}

impl Rendezvous {
    /// Rank `rank` of `world` ranks, meeting at `addr` (`host:port`; rank 0 listens there),
    /// each wait bounded by `timeout`.
    pub fn new(
        addr: impl ToSocketAddrs + std::fmt::Debug,
        world: usize,
        rank: usize,
        timeout: Duration,
    ) -> Result<Self> {
        let shown = format!("{addr:?}");
        let addr = addr
            .to_socket_addrs()
            .map_err(|e| Error::io(format!("resolving the rendezvous address {shown}"), e))?
            .next()
            .ok_or_else(|| Error::Invalid(format!("{shown} names no address")))?;
        if world == 0 || rank >= world {
            return Err(Error::Invalid(format!(
                "rank {rank} of a world of {world}: ranks are 0 to world - 1"
            )));
        }
        Ok(Rendezvous {
            addr,
            world,
            rank,
            timeout,
        })
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// How many ranks the run has.
    pub fn world(&self) -> usize {
        self.world
    }

    /// Joins the run. Rank 0 binds the address first, then calls `make` for the payload and
    /// waits for every other rank; the others connect (retrying until rank 0 listens) and
    /// receive the payload. A world of one needs no network.
    pub fn join(&self, make: impl FnOnce() -> Result<Vec<u8>>) -> Result<Session> {
        let deadline = Instant::now() + self.timeout;
        let (payload, peers) = if self.rank == 0 {
            let listener = self.listen()?;
            let payload = make()?;
            if payload.len() > MAX_PAYLOAD {
                return Err(Error::Invalid(format!(
                    "a rendezvous payload of {} bytes (at most {MAX_PAYLOAD})",
                    payload.len()
                )));
            }
            let peers = self.accept_all(&listener, deadline)?;
            for (i, peer) in peers.iter().enumerate() {
                self.send_welcome(peer, i + 1, &payload)?;
            }
            (payload, peers)
        } else {
            let stream = self.connect(deadline)?;
            let payload = self.receive_welcome(&stream, deadline)?;
            (payload, vec![stream])
        };
        Ok(Session {
            rendezvous: self.clone(),
            payload,
            peers,
        })
    }

    fn fail(&self, detail: impl Into<String>) -> Error {
        Error::Rendezvous {
            rank: self.rank,
            addr: self.addr.to_string(),
            detail: detail.into(),
        }
    }

    fn listen(&self) -> Result<TcpListener> {
        let listener = TcpListener::bind(self.addr)
            .map_err(|e| self.fail(format!("rank 0 cannot listen there: {e}")))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| self.fail(format!("setting the listener non-blocking: {e}")))?;
        Ok(listener)
    }

    /// Rank 0: a connection from every other rank, by rank, or an error naming the ranks
    /// that did not join by `deadline`.
    fn accept_all(&self, listener: &TcpListener, deadline: Instant) -> Result<Vec<TcpStream>> {
        let mut joined: Vec<Option<TcpStream>> = (1..self.world).map(|_| None).collect();
        while joined.iter().any(Option::is_none) {
            match listener.accept() {
                Ok((stream, from)) => {
                    let rank = self.read_hello(&stream, from, deadline)?;
                    if joined[rank - 1].is_some() {
                        return Err(self.fail(format!(
                            "rank {rank} joined twice (the second from {from}): two processes \
                             were given the same rank"
                        )));
                    }
                    joined[rank - 1] = Some(stream);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        let missing: Vec<String> = (1..self.world)
                            .filter(|r| joined[r - 1].is_none())
                            .map(|r| r.to_string())
                            .collect();
                        return Err(self.fail(format!(
                            "rank{} {} of {} did not connect within {:.1} s",
                            if missing.len() > 1 { "s" } else { "" },
                            missing.join(", "),
                            self.world,
                            self.timeout.as_secs_f64()
                        )));
                    }
                    std::thread::sleep(POLL);
                }
                Err(e) => return Err(self.fail(format!("accepting a connection: {e}"))),
            }
        }
        Ok(joined.into_iter().flatten().collect())
    }

    /// Rank 0: the rank a new connection says it is, checked against this run.
    fn read_hello(&self, stream: &TcpStream, from: SocketAddr, deadline: Instant) -> Result<usize> {
        let mut hello = [0u8; 16];
        read_by(stream, &mut hello, deadline).map_err(|e| {
            self.fail(format!(
                "a connection from {from} did not say its rank: {e} (a rank that exited while \
                 joining, or another program)"
            ))
        })?;
        let word = |i: usize| u32::from_le_bytes(hello[i..i + 4].try_into().expect("4 bytes"));
        if &hello[..4] != HELLO || word(4) != VERSION {
            return Err(self.fail(format!(
                "a connection from {from} does not speak this rendezvous protocol (version \
                 {VERSION})"
            )));
        }
        let (world, rank) = (word(8) as usize, word(12) as usize);
        if world != self.world || rank == 0 || rank >= self.world {
            return Err(self.fail(format!(
                "a connection from {from} claims rank {rank} of {world}, this run has ranks 1 \
                 to {} joining rank 0",
                self.world - 1
            )));
        }
        Ok(rank)
    }

    fn send_welcome(&self, stream: &TcpStream, rank: usize, payload: &[u8]) -> Result<()> {
        let mut msg = Vec::with_capacity(8 + payload.len());
        msg.extend_from_slice(WELCOME);
        msg.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        msg.extend_from_slice(payload);
        (&*stream).write_all(&msg).map_err(|e| {
            self.fail(format!(
                "rank {rank} closed its connection while joining: {e}"
            ))
        })
    }

    /// A rank other than 0: a connection to rank 0 that has said which rank this is, retried
    /// until `deadline` while rank 0 is not listening yet.
    fn connect(&self, deadline: Instant) -> Result<TcpStream> {
        let stream = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match TcpStream::connect_timeout(&self.addr, left.max(POLL)) {
                Ok(s) => break s,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(POLL);
                }
                Err(e) => {
                    return Err(self.fail(format!(
                        "rank 0 could not be reached within {:.1} s (last: {e}): it exited, \
                         never started, or listens elsewhere",
                        self.timeout.as_secs_f64()
                    )))
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let mut hello = Vec::with_capacity(16);
        hello.extend_from_slice(HELLO);
        for w in [VERSION, self.world as u32, self.rank as u32] {
            hello.extend_from_slice(&w.to_le_bytes());
        }
        (&stream)
            .write_all(&hello)
            .map_err(|e| self.fail(format!("rank 0 closed the connection: {e}")))?;
        Ok(stream)
    }

    fn receive_welcome(&self, stream: &TcpStream, deadline: Instant) -> Result<Vec<u8>> {
        let lost = |e: std::io::Error| {
            self.fail(format!(
                "rank 0 did not send the payload: {e} (rank 0 exited, or another rank did not \
                 join in time)"
            ))
        };
        let mut head = [0u8; 8];
        read_by(stream, &mut head, deadline).map_err(lost)?;
        let len = u32::from_le_bytes(head[4..].try_into().expect("4 bytes")) as usize;
        if &head[..4] != WELCOME || len > MAX_PAYLOAD {
            return Err(self.fail("rank 0 does not speak this rendezvous protocol"));
        }
        let mut payload = vec![0u8; len];
        read_by(stream, &mut payload, deadline).map_err(lost)?;
        Ok(payload)
    }
}

impl Session {
    /// What rank 0 handed out.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rendezvous.rank
    }

    /// How many ranks the run has.
    pub fn world(&self) -> usize {
        self.rendezvous.world
    }

    /// Waits until every rank has called `barrier`, bounded by the rendezvous's timeout.
    /// Rank 0 names the ranks that did not arrive in time or whose connection closed
    /// (exited); the others report rank 0's.
    pub fn barrier(&self) -> Result<()> {
        self.barrier_within(self.rendezvous.timeout)
    }

    /// [`Session::barrier`] bounded by `timeout` instead.
    pub fn barrier_within(&self, timeout: Duration) -> Result<()> {
        let rv = &self.rendezvous;
        let deadline = Instant::now() + timeout;
        let mut byte = [0u8; 1];
        if rv.rank == 0 {
            let mut failed = Vec::new();
            for (i, peer) in self.peers.iter().enumerate() {
                if let Err(e) = read_by(peer, &mut byte, deadline) {
                    failed.push(format!("rank {} ({})", i + 1, describe_loss(&e)));
                }
            }
            if !failed.is_empty() {
                return Err(rv.fail(format!("barrier: {} did not arrive", failed.join(", "))));
            }
            for (i, peer) in self.peers.iter().enumerate() {
                (&*peer).write_all(&[1]).map_err(|e| {
                    rv.fail(format!(
                        "barrier: rank {} closed its connection: {e}",
                        i + 1
                    ))
                })?;
            }
            Ok(())
        } else {
            let peer = &self.peers[0];
            (&*peer)
                .write_all(&[1])
                .map_err(|e| rv.fail(format!("barrier: rank 0 closed the connection: {e}")))?;
            read_by(peer, &mut byte, deadline).map_err(|e| {
                rv.fail(format!(
                    "barrier: rank 0 did not release it ({}): rank 0 or another rank exited \
                     or hangs",
                    describe_loss(&e)
                ))
            })
        }
    }
}

/// `closed (exited)` for a connection closed by its peer, `no answer within the time` for a
/// timeout, the error otherwise.
fn describe_loss(e: &std::io::Error) -> String {
    match e.kind() {
        ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset | ErrorKind::BrokenPipe => {
            "its connection closed: it exited".into()
        }
        ErrorKind::TimedOut | ErrorKind::WouldBlock => "no answer within the time".into(),
        _ => e.to_string(),
    }
}

/// Fills `buf` from `stream` before `deadline`: `UnexpectedEof` when the peer closes first,
/// `TimedOut` when the deadline passes.
fn read_by(stream: &TcpStream, buf: &mut [u8], deadline: Instant) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    let mut filled = 0;
    while filled < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left))?;
        match (&*stream).read(&mut buf[filled..]) {
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) => filled += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(ErrorKind::TimedOut.into())
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

//! How the service turns the requests it drains into groups of adjacent ranges, and the
//! groups into prefetch calls.

use lookahead::ByteRange;

use super::ServiceConfig;
use crate::ring::Request;

/// A group of requests whose ranges follow each other in memory, issued together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The merged range.
    pub range: ByteRange,
    /// The requests it covers, in arrival order.
    pub requests: Vec<Request>,
}

/// How many bytes of adjacent requests one thread takes at a time, for a drain of `total`
/// bytes: enough batches to keep every worker busy twice over, each between
/// `min_batch_bytes` and `piece_bytes` (large calls are what reach the interconnect's rate;
/// small first batches are what let a kernel start early).
pub fn batch_bytes(total: u64, config: &ServiceConfig) -> u64 {
    let per = total / (2 * config.threads.max(1) as u64);
    per.clamp(
        config.min_batch_bytes.min(config.piece_bytes.max(1)),
        config.piece_bytes.max(1),
    )
}

/// Merges requests that arrive one after the other and touch or overlap in memory, into
/// groups of at most `max_bytes` (a single larger request is a group of its own; arrival
/// order is kept: kernels usually wait on requests in the order they made them). Requests
/// of zero bytes get a group of their own with a zero-length range.
pub fn group(requests: &[Request], max_bytes: u64) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for r in requests {
        if let Some(g) = groups.last_mut() {
            let end = g.range.start + g.range.len;
            let new_end = end.max(r.ptr.saturating_add(r.bytes));
            if r.bytes > 0
                && g.range.len > 0
                && r.ptr >= g.range.start
                && r.ptr <= end
                && new_end - g.range.start <= max_bytes
            {
                let new_end = end.max(r.ptr.saturating_add(r.bytes));
                g.range.len = new_end - g.range.start;
                g.requests.push(*r);
                continue;
            }
        }
        groups.push(Group {
            range: ByteRange {
                start: r.ptr,
                len: r.bytes,
            },
            requests: vec![*r],
        });
    }
    groups
}

/// Cuts `range` into pieces of at most `piece` bytes (0: one piece).
pub fn pieces(range: ByteRange, piece: u64) -> Vec<ByteRange> {
    if piece == 0 || range.len <= piece {
        return vec![range];
    }
    (0..range.len.div_ceil(piece))
        .map(|i| {
            let start = range.start + i * piece;
            ByteRange {
                start,
                len: piece.min(range.start + range.len - start),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::Request;

    fn req(flag: u32, ptr: u64, bytes: u64) -> Request {
        Request {
            flag,
            generation: 1,
            ptr,
            bytes,
        }
    }

    #[test]
    fn groups_adjacent_requests_in_arrival_order() {
        let g = group(
            &[
                req(0, 0, 100),
                req(1, 100, 50),
                req(2, 120, 10), // overlaps the group
                req(3, 1000, 10),
                req(4, 0, 10), // before the previous group: new group
            ],
            u64::MAX,
        );
        assert_eq!(g.len(), 3);
        assert_eq!(g[0].range, ByteRange { start: 0, len: 150 });
        assert_eq!(g[0].requests.len(), 3);
        assert_eq!(
            g[1].range,
            ByteRange {
                start: 1000,
                len: 10
            }
        );
        assert_eq!(g[2].requests[0].flag, 4);
    }

    #[test]
    fn zero_byte_requests_stay_alone() {
        let g = group(&[req(0, 0, 0), req(1, 0, 8), req(2, 8, 0)], u64::MAX);
        assert_eq!(g.len(), 3);
    }

    #[test]
    fn groups_stop_at_the_batch_size_between_requests() {
        // Ten adjacent 3-byte requests in batches of at most 7 bytes: pairs of requests.
        let rs: Vec<Request> = (0..10).map(|i| req(i, i as u64 * 3, 3)).collect();
        let g = group(&rs, 7);
        assert_eq!(g.len(), 5);
        for (k, grp) in g.iter().enumerate() {
            assert_eq!(
                grp.range,
                ByteRange {
                    start: 6 * k as u64,
                    len: 6
                }
            );
            assert_eq!(grp.requests.len(), 2);
        }
        // A request larger than the batch is a group of its own, never split here.
        let g = group(&[req(0, 0, 4), req(1, 4, 100), req(2, 104, 4)], 7);
        assert_eq!(
            g.iter().map(|g| g.requests.len()).collect::<Vec<_>>(),
            [1, 1, 1]
        );
    }

    #[test]
    fn batches_keep_every_worker_busy_within_bounds() {
        let c = ServiceConfig {
            threads: 16,
            piece_bytes: 32 << 20,
            min_batch_bytes: 2 << 20,
            ..ServiceConfig::default()
        };
        // The default measured best on the H100 (results/ivf_bench.md's service settings).
        assert_eq!(ServiceConfig::default().min_batch_bytes, 8 << 20);
        assert_eq!(batch_bytes(4 << 30, &c), 32 << 20); // capped
        assert_eq!(batch_bytes(256 << 20, &c), 8 << 20); // 32 batches for 16 workers
        assert_eq!(batch_bytes(1 << 20, &c), 2 << 20); // floor
    }

    #[test]
    fn pieces_cover_the_range_exactly() {
        let r = ByteRange {
            start: 4096,
            len: 10 * 1024 + 5,
        };
        let p = pieces(r, 1024);
        assert_eq!(p.len(), 11);
        assert_eq!(p[0].start, 4096);
        assert_eq!(p.iter().map(|p| p.len).sum::<u64>(), r.len);
        assert_eq!(p.last().unwrap().len, 5);
        assert_eq!(pieces(r, 0), vec![r]);
    }
}

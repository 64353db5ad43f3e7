//! Warp-wide operations: what each lane deposits, and how the values are exchanged once
//! every lane of the warp has arrived (the semantics of PTX `shfl.sync` and `vote.sync` with
//! a full mask).

/// The `shfl.sync` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShuffleMode {
    /// From lane `lane + delta`; lanes past 31 keep their own value.
    Down,
    /// From lane `lane - delta`; lanes below `delta` keep their own value.
    Up,
    /// From lane `lane ^ mask` (butterfly).
    Xor,
    /// From lane `src` (`src` taken modulo 32).
    Idx,
}

/// One lane's part in a warp-wide operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarpOp {
    /// `shfl.sync.<mode>.b32` of `value` with lane argument `arg`.
    Shuffle {
        /// The mode.
        mode: ShuffleMode,
        /// This lane's value.
        value: u32,
        /// The delta, mask or source lane.
        arg: u32,
    },
    /// `vote.sync.all.pred`.
    All(bool),
    /// `vote.sync.any.pred`.
    Any(bool),
    /// `vote.sync.ballot.b32`.
    Ballot(bool),
    /// `bar.warp.sync`: the lanes wait for each other and go on together.
    Sync,
    /// `activemask.b32`: the lanes executing it together. Unlike the others it does not
    /// need the whole warp: it resolves once no lane of the warp can run further, to the
    /// lanes waiting at it.
    ActiveMask,
}

impl WarpOp {
    /// A short name for reports.
    pub fn name(&self) -> &'static str {
        match self {
            WarpOp::Shuffle {
                mode: ShuffleMode::Down,
                ..
            } => "shfl.sync.down",
            WarpOp::Shuffle {
                mode: ShuffleMode::Up,
                ..
            } => "shfl.sync.up",
            WarpOp::Shuffle {
                mode: ShuffleMode::Xor,
                ..
            } => "shfl.sync.bfly",
            WarpOp::Shuffle {
                mode: ShuffleMode::Idx,
                ..
            } => "shfl.sync.idx",
            WarpOp::All(_) => "vote.sync.all",
            WarpOp::Any(_) => "vote.sync.any",
            WarpOp::Ballot(_) => "vote.sync.ballot",
            WarpOp::Sync => "bar.warp.sync",
            WarpOp::ActiveMask => "activemask",
        }
    }
}

/// Results for lanes `0..ops.len()` of a warp whose lanes all deposited `ops` (a partial
/// last warp has fewer than 32). `Err` names the operations when the lanes disagree on
/// which one they are executing.
pub(crate) fn resolve(ops: &[WarpOp]) -> Result<Vec<u32>, String> {
    let first = ops[0];
    if let Some(other) = ops.iter().find(|o| o.name() != first.name()) {
        return Err(format!(
            "lanes of one warp are executing different warp operations ({} and {}): every lane \
             must reach the same shuffle or vote",
            first.name(),
            other.name()
        ));
    }
    let n = ops.len() as u32;
    let pred = |o: &WarpOp| {
        matches!(
            o,
            WarpOp::All(true) | WarpOp::Any(true) | WarpOp::Ballot(true)
        )
    };
    Ok(match first {
        WarpOp::Shuffle { .. } => {
            let value = |lane: u32| match ops[lane as usize] {
                WarpOp::Shuffle { value, .. } => value,
                _ => unreachable!(),
            };
            (0..n)
                .map(|lane| {
                    let WarpOp::Shuffle { mode, arg, .. } = ops[lane as usize] else {
                        unreachable!()
                    };
                    let src = match mode {
                        ShuffleMode::Down => lane.checked_add(arg).filter(|&s| s < 32),
                        ShuffleMode::Up => lane.checked_sub(arg),
                        ShuffleMode::Xor => Some(lane ^ arg).filter(|&s| s < 32),
                        ShuffleMode::Idx => Some(arg % 32),
                    };
                    // A source outside the warp (or past a partial warp's end) reads the
                    // lane's own value, as the clamp rules of `shfl.sync` do.
                    match src {
                        Some(s) if s < n => value(s),
                        _ => value(lane),
                    }
                })
                .collect()
        }
        WarpOp::All(_) => vec![ops.iter().all(pred) as u32; n as usize],
        WarpOp::Any(_) => vec![ops.iter().any(pred) as u32; n as usize],
        WarpOp::ActiveMask => vec![(u64::MAX >> (64 - n)) as u32; n as usize],
        WarpOp::Sync => vec![0; n as usize],
        WarpOp::Ballot(_) => {
            let mask = ops
                .iter()
                .enumerate()
                .filter(|(_, o)| pred(o))
                .fold(0u32, |m, (i, _)| m | 1 << i);
            vec![mask; n as usize]
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shfl(mode: ShuffleMode, arg: u32) -> Vec<u32> {
        let ops: Vec<_> = (0..32)
            .map(|l| WarpOp::Shuffle {
                mode,
                value: 100 + l,
                arg,
            })
            .collect();
        resolve(&ops).unwrap()
    }

    #[test]
    fn shuffles_follow_ptx_clamping() {
        let down = shfl(ShuffleMode::Down, 4);
        assert_eq!(down[0], 104);
        assert_eq!(down[27], 131);
        assert_eq!(down[28], 128, "past the end keeps its own value");
        let up = shfl(ShuffleMode::Up, 4);
        assert_eq!(up[3], 103);
        assert_eq!(up[4], 100);
        let x = shfl(ShuffleMode::Xor, 16);
        assert_eq!(x[0], 116);
        assert_eq!(x[20], 104);
        assert!(shfl(ShuffleMode::Idx, 7).iter().all(|&v| v == 107));
    }

    #[test]
    fn votes() {
        let ops: Vec<_> = (0..32).map(|l| WarpOp::Ballot(l % 2 == 0)).collect();
        assert_eq!(resolve(&ops).unwrap()[5], 0x5555_5555);
        let ops: Vec<_> = (0..32).map(|l| WarpOp::All(l != 3)).collect();
        assert_eq!(resolve(&ops).unwrap()[0], 0);
        let ops: Vec<_> = (0..32).map(|l| WarpOp::Any(l == 3)).collect();
        assert_eq!(resolve(&ops).unwrap()[0], 1);
    }

    #[test]
    fn mixed_operations_are_reported() {
        let mut ops = vec![WarpOp::Any(true); 32];
        ops[9] = WarpOp::Ballot(true);
        assert!(resolve(&ops).unwrap_err().contains("vote.sync.any"));
    }

    #[test]
    fn partial_warp_reads_own_value_past_its_end() {
        let ops: Vec<_> = (0..8)
            .map(|l| WarpOp::Shuffle {
                mode: ShuffleMode::Down,
                value: l,
                arg: 4,
            })
            .collect();
        assert_eq!(resolve(&ops).unwrap(), vec![4, 5, 6, 7, 4, 5, 6, 7]);
    }
}

//! A seed is one schedule: the same seed gives the same trace and totals; the simulator finds
//! no violation on a few correct seeds and finds the deliberate ones (the mutation check, a few
//! seeds here in the debug build; `scripts/sim --mutation ... --expect-violation` runs the full
//! default count).

use sluice_sim::{run_seed, Mutation, SimConfig};

fn short(seed: u64) -> SimConfig {
    let mut c = SimConfig::new(seed);
    c.duration_ms = 3 * 60_000 + sluice_sim::QUIET_MS;
    c.trace_lines = 1000;
    c
}

#[test]
fn a_seed_replays_exactly() {
    let a = run_seed(short(11));
    let b = run_seed(short(11));
    assert_eq!(a, b);
    assert!(a.faults >= 15, "{} faults", a.faults);
    assert!(a.acked > 0 && a.elections > 0, "{a:?}");
    let c = run_seed(short(12));
    assert_ne!(a.trace, c.trace);
}

#[test]
fn correct_seeds_have_no_violation() {
    for seed in 0..3 {
        let r = run_seed(short(seed));
        assert!(r.violations.is_empty(), "seed {seed}: {:?}", r.violations);
        assert!(r.committed > 5, "seed {seed}: only {} entries", r.committed);
    }
}

#[test]
fn mutations_are_found() {
    for (mutation, seeds) in [
        (Mutation::AckBeforeCommit, 0..5),
        (Mutation::LyingFsync, 0..20),
    ] {
        let found = seeds.clone().find(|&seed| {
            let mut c = short(seed);
            c.duration_ms = 10 * 60_000 + sluice_sim::QUIET_MS;
            c.mutation = Some(mutation);
            !run_seed(c).violations.is_empty()
        });
        assert!(found.is_some(), "{mutation:?} not found in seeds {seeds:?}");
    }
}

/// Seeds that once failed, kept as regressions: 483 and 532 ended with an entry committed in
/// the last milliseconds, which the followers had not heard of yet (the liveness check then
/// demanded every voter at the log's very end; it now demands the log of 3 s before the end).
#[test]
fn regression_seeds_pass() {
    for seed in [483, 532] {
        let r = run_seed(SimConfig::new(seed));
        assert!(r.violations.is_empty(), "seed {seed}: {:?}", r.violations);
        assert!(r.faults >= 50, "seed {seed}: {} faults", r.faults);
    }
}

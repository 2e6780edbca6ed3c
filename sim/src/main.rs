//! `sluice-sim`: runs seeds of the controller-quorum simulation.
//!
//! `sluice-sim --seed N` replays one seed and prints its trace as it runs;
//! `sluice-sim --seeds N [--from S] [--threads T]` runs seeds S..S+N and prints totals;
//! `--mutation ack-before-commit|lying-fsync|decide-before-catch-up|acks-at-append|hw-from-leader|
//! ignore-write-errors|stale-snapshot|snapshot-keeps-state|skip-dedupe|commit-before-replicate`
//! breaks one rule on purpose, and
//! `--expect-violation` then succeeds only if some seed finds a violation (it stops there).
//! Exit status: 0 when the outcome is the expected one, 1 otherwise, 2 on bad arguments.

use std::process::ExitCode;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

use sluice_sim::check::SnapshotStats;
use sluice_sim::replica::ReplStats;
use sluice_sim::{run_seed, Mutation, SeedReport, SimConfig};

/// Runs one seed; a panic anywhere in the simulated code is that seed's violation.
fn run_caught(cfg: SimConfig) -> SeedReport {
    let seed = cfg.seed;
    let sim_ms = cfg.duration_ms;
    catch_unwind(AssertUnwindSafe(|| run_seed(cfg))).unwrap_or_else(|p| {
        let what = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        SeedReport {
            seed,
            faults: 0,
            sim_ms,
            events: 0,
            committed: 0,
            acked: 0,
            elections: 0,
            fencings: 0,
            repl: Default::default(),
            promised: 0,
            exempt: 0,
            snapshots: Default::default(),
            violations: vec![format!("panic: {what}")],
            trace: vec![format!(
                "(replay with scripts/sim --seed {seed} for the trace up to the panic)"
            )],
        }
    })
}

struct Args {
    seed: Option<u64>,
    seeds: u64,
    from: u64,
    threads: usize,
    mutation: Option<Mutation>,
    expect_violation: bool,
    minutes: Option<u64>,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        seed: None,
        seeds: 100,
        from: 0,
        threads: 2,
        mutation: None,
        expect_violation: false,
        minutes: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        let num = |v: String| v.parse::<u64>().map_err(|e| format!("{v}: {e}"));
        match flag.as_str() {
            "--seed" => a.seed = Some(num(value("--seed")?)?),
            "--seeds" => a.seeds = num(value("--seeds")?)?,
            "--from" => a.from = num(value("--from")?)?,
            "--threads" => a.threads = num(value("--threads")?)?.max(1) as usize,
            "--minutes" => a.minutes = Some(num(value("--minutes")?)?),
            "--mutation" => {
                let v = value("--mutation")?;
                a.mutation = Some(Mutation::parse(&v).ok_or(format!("unknown mutation {v}"))?);
            }
            "--expect-violation" => a.expect_violation = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

fn config(a: &Args, seed: u64, trace_lines: usize) -> SimConfig {
    let mut c = SimConfig::new(seed);
    c.mutation = a.mutation;
    c.trace_lines = trace_lines;
    if let Some(m) = a.minutes {
        c.duration_ms = m * 60_000 + sluice_sim::QUIET_MS;
    }
    c
}

fn snapshot_line(s: &SnapshotStats) -> String {
    format!(
        "{} taken, {} installed from a leader, {} loaded at a restart",
        s.taken, s.installed, s.loaded
    )
}

fn repl_line(s: &ReplStats, promised: u64, exempt: u64) -> String {
    format!(
        "{} produces, {} acked (acks=all), {} answered (acks=1), {} NOT_ENOUGH_REPLICAS, {} NOT_ENOUGH_REPLICAS_AFTER_APPEND, {} timed out, {} not leader; {} leader changes, {} ISR changes, {} truncations, {} power losses, {} appends refused by a full disk; {} records consumed; {} records promised at the end, {} dropped by allowed losses",
        s.produces,
        s.acked_batches,
        s.acks1_answered,
        s.not_enough_replicas,
        s.not_enough_replicas_after_append,
        s.timed_out,
        s.not_leader,
        s.leader_changes,
        s.isr_changes,
        s.truncations,
        s.power_losses,
        s.storage_errors,
        s.consumed,
        promised,
        exempt
    )
}

fn groups_line(s: &ReplStats) -> String {
    format!(
        "{} OffsetCommits sent, {} written, {} acknowledged; {} coordinator loads, {} consumer restarts",
        s.commits_sent, s.commits_written, s.commits_acked, s.coordinator_loads, s.consumer_restarts
    )
}

fn transactions_line(s: &ReplStats) -> String {
    format!(
        "{} InitProducerId answered, {} transactions committed, {} aborted (EndTxn acknowledged), {} producer restarts (restart, fenced or timed out); {} markers written ({} routed to another incarnation of their topic, {} skipped as deleted while the topic was re-created); {} transaction coordinator loads; read_committed: {} records delivered, {} aborted dropped",
        s.txn_inits,
        s.txns_committed,
        s.txns_aborted,
        s.txn_producer_restarts,
        s.markers_written,
        s.markers_misrouted,
        s.markers_skipped,
        s.txn_coordinator_loads,
        s.read_committed_delivered,
        s.read_committed_dropped
    )
}

fn idempotence_line(s: &ReplStats) -> String {
    format!(
        "{} idempotent sends, {} acknowledged, {} answered as duplicates, {} refused (sequence or epoch), {} epoch bumps; {} producer-state snapshots, {} rebuilds",
        s.idempotent_sends,
        s.idempotent_acked,
        s.duplicates,
        s.out_of_order,
        s.epoch_bumps,
        s.producer_snapshots,
        s.producer_state_loads
    )
}

fn print_failure(r: &SeedReport) {
    println!(
        "seed {} FAILED ({} violations):",
        r.seed,
        r.violations.len()
    );
    for v in &r.violations {
        println!("  violation: {v}");
    }
    println!("  trace tail (replay: scripts/sim --seed {}):", r.seed);
    for line in &r.trace {
        println!("    {line}");
    }
}

fn main() -> ExitCode {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("sluice-sim: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(seed) = a.seed {
        let mut cfg = config(&a, seed, 1);
        cfg.print_trace = true;
        let r = run_seed(cfg);
        println!(
            "seed {seed}: {} faults, {:.1} simulated minutes, {} events, {} entries committed, {} acknowledged, {} elections, {} fencings, {} violations",
            r.faults,
            r.sim_ms as f64 / 60_000.0,
            r.events,
            r.committed,
            r.acked,
            r.elections,
            r.fencings,
            r.violations.len()
        );
        println!("replication: {}", repl_line(&r.repl, r.promised, r.exempt));
        println!("idempotence: {}", idempotence_line(&r.repl));
        println!("groups: {}", groups_line(&r.repl));
        println!("transactions: {}", transactions_line(&r.repl));
        println!("snapshots: {}", snapshot_line(&r.snapshots));
        for v in &r.violations {
            println!("violation: {v}");
        }
        let ok = r.violations.is_empty() != a.expect_violation;
        return if ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    let seeds: Vec<u64> = (a.from..a.from + a.seeds).collect();
    let chunks: Vec<Vec<u64>> = (0..a.threads)
        .map(|t| seeds.iter().copied().skip(t).step_by(a.threads).collect())
        .collect();
    let found = AtomicBool::new(false);
    let reports: Vec<SeedReport> = std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .iter()
            .map(|chunk| {
                let a = &a;
                let found = &found;
                s.spawn(move || {
                    let mut out = Vec::new();
                    for &seed in chunk {
                        // The mutation check stops at its first find (the outcome is the same).
                        if a.expect_violation && found.load(Ordering::Relaxed) {
                            break;
                        }
                        let r = run_caught(config(a, seed, 40));
                        if !r.violations.is_empty() {
                            found.store(true, Ordering::Relaxed);
                        }
                        out.push(r);
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut failed: Vec<&SeedReport> = reports
        .iter()
        .filter(|r| !r.violations.is_empty())
        .collect();
    failed.sort_by_key(|r| r.seed);
    if !a.expect_violation {
        for r in failed.iter().take(3) {
            print_failure(r);
        }
        if failed.len() > 3 {
            let seeds: Vec<String> = failed.iter().map(|r| r.seed.to_string()).collect();
            println!(
                "failing seeds (each replays with --seed N): {}",
                seeds.join(" ")
            );
        }
    } else if let Some(r) = failed.first() {
        println!(
            "mutation {:?} found by seed {}: {}",
            a.mutation, r.seed, r.violations[0]
        );
    }
    let faults: u64 = reports.iter().map(|r| r.faults).sum();
    let hours: f64 = reports.iter().map(|r| r.sim_ms as f64).sum::<f64>() / 3_600_000.0;
    let min_faults = reports.iter().map(|r| r.faults).min().unwrap_or(0);
    let acked: u64 = reports.iter().map(|r| r.acked).sum();
    let violations: usize = reports.iter().map(|r| r.violations.len()).sum();
    let mut total = ReplStats::default();
    for r in &reports {
        total.add(&r.repl);
    }
    let promised: u64 = reports.iter().map(|r| r.promised).sum();
    let exempt: u64 = reports.iter().map(|r| r.exempt).sum();
    println!("replication: {}", repl_line(&total, promised, exempt));
    println!("idempotence: {}", idempotence_line(&total));
    println!("groups: {}", groups_line(&total));
    println!("transactions: {}", transactions_line(&total));
    let mut snaps = SnapshotStats::default();
    for r in &reports {
        snaps.add(&r.snapshots);
    }
    println!("snapshots: {}", snapshot_line(&snaps));
    println!(
        "seeds {} (from {}), faults {faults} (min {min_faults} per seed), simulated hours {hours:.1}, acknowledged commands {acked}, violations {violations} in {} seeds",
        reports.len(),
        a.from,
        failed.len()
    );
    let ok = if a.expect_violation {
        !failed.is_empty()
    } else {
        failed.is_empty() && reports.len() as u64 == a.seeds
    };
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

//! Shared by the benches: thread CPU time as a criterion measurement, and the fixed-iteration
//! mode (`EXITVOICE_BENCH_ITERS=N`) used for callgrind instruction counts (docs/benchmarks.md).

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::Criterion;

/// Nanoseconds this thread has run on a CPU.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// Thread CPU time as a criterion measurement, formatted like wall time.
pub struct CpuTime(pub WallTime);

impl Measurement for CpuTime {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, start: u64) -> u64 {
        thread_cpu_ns().saturating_sub(start)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        self.0.formatter()
    }
}

/// With `EXITVOICE_BENCH_ITERS=N` set, runs `path` N times without criterion, prints the mean
/// thread CPU time per run and returns `true`; otherwise returns `false` at once.
pub fn run_fixed_iterations(mut path: impl FnMut()) -> bool {
    let Some(n) = std::env::var("EXITVOICE_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    else {
        return false;
    };
    let start = thread_cpu_ns();
    for _ in 0..n {
        path();
    }
    let per = (thread_cpu_ns() - start) as f64 / n.max(1) as f64;
    println!("{n} iterations, {per:.0} ns CPU each");
    true
}

/// Runs a bench's criterion benchmarks twice, in wall time (`wall`, criterion's default) and in
/// thread CPU time (`cpu`), each tagged in its names, then prints criterion's summary.
pub fn run_wall_and_cpu(
    wall: fn(&mut Criterion<WallTime>, &str),
    cpu: fn(&mut Criterion<CpuTime>, &str),
) {
    wall(&mut Criterion::default().configure_from_args(), "wall");
    cpu(
        &mut Criterion::default()
            .with_measurement(CpuTime(WallTime))
            .configure_from_args(),
        "cpu",
    );
    Criterion::default().configure_from_args().final_summary();
}

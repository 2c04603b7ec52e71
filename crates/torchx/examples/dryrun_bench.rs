//! In-process dry run of one role with N replicas (default 1000) on local_cwd; prints the median
//! over repeated runs. Used by bench/compare.py.

use std::time::Instant;

use torchx::opts::Cfg;
use torchx::scheduler::{DryRunContext, Scheduler};
use torchx::schedulers::local_cwd::LocalCwdScheduler;
use torchx::specs::{AppDef, Role};

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let role = Role::new("trainer", "img")
        .with_entrypoint("python")
        .with_args(["train.py", "--rank", "${replica_id}", "--id", "${app_id}"])
        .with_replicas(n);
    let app = AppDef::new("bench", vec![role]);
    let sched = LocalCwdScheduler::new("/tmp/torchx-bench-state".into());
    let cfg = sched
        .run_opts()
        .resolve(&Cfg::new())
        .expect("defaults resolve");
    let ctx = DryRunContext::new("torchx", "abc", "/tmp");
    let mut times = Vec::new();
    for _ in 0..21 {
        let t = Instant::now();
        let req = sched.submit_dryrun(&app, &cfg, &ctx).expect("dryrun");
        if std::env::var_os("BENCH_NO_RENDER").is_none() {
            std::hint::black_box(req.render());
        }
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    println!("{:.3}", times[times.len() / 2]);
}

//! Fills a `local_cwd` job ledger with N finished apps, for benchmarking `torchx list`.
//!
//! Usage: `TORCHX_STATE_DIR=/tmp/s cargo run --release --features testing --example ledger_fill -- 10000`

fn main() -> torchx::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let state_dir = torchx::schedulers::default_state_dir();
    let path = torchx::schedulers::local_cwd::fill_ledger_for_benchmarks(&state_dir, n)?;
    println!("{n} apps recorded in {}", path.display());
    Ok(())
}

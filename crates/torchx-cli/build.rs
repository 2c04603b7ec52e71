//! Links the `torchx` binary as a non-PIE executable on Linux: a PIE must apply tens of thousands
//! of relative relocations (the AWS and Kubernetes clients' tables) at every start, touching
//! ~0.7 MB of pages; a non-PIE has them resolved at link time. This keeps `torchx --help` as fast
//! with every backend compiled in as without (BENCHMARKS.md).
fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}

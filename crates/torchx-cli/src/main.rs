//! The stock `torchx` binary: the CLI over the builtins (and plugins on PATH).

fn main() {
    torchx_cli::main(torchx::Extensions::builtin())
}

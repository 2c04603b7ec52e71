//! The stock `torchx` binary: the CLI over the builtins (and plugins on PATH).

fn main() {
    torchx_cli::main(torchx::extensions::Extensions::builtin())
}

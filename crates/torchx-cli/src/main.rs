//! The `torchx` command line. All logic lives in the `torchx` library; this crate parses
//! arguments, renders output and errors, and maps outcomes to exit codes.

mod cli;
mod commands;
mod exit_codes;
mod output;

fn main() {
    std::process::exit(cli::main());
}

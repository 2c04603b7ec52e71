//! Terminal output: the logger and error rendering. Only this crate writes to the terminal.

use std::io::Write;

/// A minimal stderr logger: `torchx LEVEL message`.
struct Logger {
    level: log::LevelFilter,
}

impl log::Log for Logger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= self.level
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            let _ = writeln!(std::io::stderr(), "torchx {:<7} {}", r.level(), r.args());
        }
    }
    fn flush(&self) {}
}

/// Installs the logger at `level` (a `log` level name or TorchX's WARNING/CRITICAL).
pub fn init_logger(level: &str) {
    let level = match level.to_ascii_uppercase().as_str() {
        "DEBUG" => log::LevelFilter::Debug,
        "INFO" => log::LevelFilter::Info,
        "ERROR" | "CRITICAL" => log::LevelFilter::Error,
        "TRACE" => log::LevelFilter::Trace,
        _ => log::LevelFilter::Warn,
    };
    if log::set_boxed_logger(Box::new(Logger { level })).is_ok() {
        log::set_max_level(level);
    }
}

/// Prints an error as one line (plus its source chain when verbose).
pub fn print_error(err: &torchx::Error, verbose: bool) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "torchx: error: {err}");
    if verbose {
        let mut source = std::error::Error::source(err);
        while let Some(s) = source {
            let _ = writeln!(stderr, "  caused by: {s}");
            source = s.source();
        }
        let _ = writeln!(stderr, "  kind: {}", err.kind());
    }
}

/// Prints `value` as pretty JSON on stdout (buffered: lists can be long).
pub fn print_json(value: &impl serde::Serialize) {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let _ = serde_json::to_writer_pretty(&mut out, value);
    let _ = writeln!(out);
}

/// Prints a table like Python's `tabulate(rows, headers)` (the "simple" format TorchX uses):
/// headers, a dashed rule per column, columns two spaces apart.
pub fn print_table(headers: &[&str], rows: &[Vec<String>]) {
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([headers[i].chars().count()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..headers.len()).map(width).collect();
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_string()
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let _ = writeln!(
        out,
        "{}",
        line(headers.iter().map(|h| h.to_string()).collect())
    );
    let _ = writeln!(
        out,
        "{}",
        line(widths.iter().map(|w| "-".repeat(*w)).collect())
    );
    for r in rows {
        let _ = writeln!(out, "{}", line(r.clone()));
    }
}

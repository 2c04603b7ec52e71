//! Terminal output: the logger and error rendering. Only this crate writes to the terminal.

use std::io::{IsTerminal, Write};

/// A minimal stderr logger: `torchx LEVEL message`.
struct Logger {
    level: log::LevelFilter,
}

impl log::Log for Logger {
    /// Ours at the chosen level; the libraries' (kube's connection errors, which the error
    /// that ends the command already says) only at DEBUG and below.
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        let ours = m.target().starts_with("torchx");
        m.level() <= self.level && (ours || self.level >= log::LevelFilter::Debug)
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            let _ = writeln!(std::io::stderr(), "torchx {:<7} {}", r.level(), r.args());
        }
    }
    fn flush(&self) {}
}

/// Installs the logger at `level` (a `log` level name or TorchX's WARNING/CRITICAL, any case).
pub fn init_logger(level: &str) -> torchx::Result<()> {
    let level = match level.to_ascii_uppercase().as_str() {
        "TRACE" => log::LevelFilter::Trace,
        "DEBUG" => log::LevelFilter::Debug,
        "INFO" => log::LevelFilter::Info,
        "WARNING" | "WARN" => log::LevelFilter::Warn,
        "ERROR" | "CRITICAL" => log::LevelFilter::Error,
        _ => {
            return Err(torchx::Error::arg(format!(
                "log level `{level}` (--log_level or $LOGLEVEL) is not one of DEBUG, INFO, \
                 WARNING, ERROR, CRITICAL"
            )))
        }
    };
    if log::set_boxed_logger(Box::new(Logger { level })).is_ok() {
        log::set_max_level(level);
    }
    Ok(())
}

/// The CLI's way around an error: the flag that takes it (none for a remedy this CLI does not
/// know, from a newer library).
pub fn remedy(remedy: torchx::Remedy) -> Option<&'static str> {
    match remedy {
        torchx::Remedy::SkipPreflight => Some("give --skip_preflight to submit it anyway"),
        torchx::Remedy::NoWorkspace => Some("give --workspace \"\" to run the image as is"),
        _ => None,
    }
}

/// Prints an error as one line (plus its source chain when verbose): its message, the name
/// suggested for a misspelt one, and the flag that gets around it.
pub fn print_error(err: &torchx::Error, verbose: bool) {
    let mut stderr = std::io::stderr().lock();
    let remedy = err.remedy().and_then(remedy).map(|r| format!("Or {r}."));
    let message = err.explained(remedy.as_deref());
    let _ = writeln!(stderr, "torchx: error: {message}");
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
/// `4.2s`, `2m05s`, `1h02m`: `s` seconds as `list` and progress lines show them.
pub fn duration(s: f64) -> String {
    if s < 60.0 {
        // Integer tenths: float formatting is the slowest part of listing 10,000 jobs.
        let tenths = (s * 10.0).round() as u64;
        format!("{}.{}s", tenths / 10, tenths % 10)
    } else if s < 3600.0 {
        format!("{}m{:02}s", (s / 60.0) as u64, (s % 60.0) as u64)
    } else {
        format!(
            "{}h{:02}m",
            (s / 3600.0) as u64,
            ((s % 3600.0) / 60.0) as u64
        )
    }
}

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

/// Where [`copy_log_lines`] writes.
#[derive(Debug, Clone, Copy)]
pub enum Sink {
    Stdout,
    Stderr,
}

impl Sink {
    fn write(self, bytes: &[u8]) {
        // One write per batch of whole lines, so replicas printing at once never mix a line.
        let _ = match self {
            Sink::Stdout => std::io::stdout().lock().write_all(bytes),
            Sink::Stderr => {
                let mut err = std::io::stderr().lock();
                // On a terminal, over a live progress line (redrawn at its next update).
                if !bytes.is_empty() && err.is_terminal() {
                    let _ = err.write_all(b"\r\x1b[2K");
                }
                err.write_all(bytes)
            }
        };
    }
}

/// Prints a replica's log lines as `{prefix} {line}`, buffered: a batch is written when it
/// reaches 64 KiB or when the source has nothing ready, so a backlog streams at disk speed and
/// a followed log still shows each line as soon as it is written. Lines are taken in batches
/// ([`LogLines::next_lines`]) and passed through as the bytes the log holds.
///
/// [`LogLines::next_lines`]: torchx::scheduler::LogLines::next_lines
pub async fn copy_log_lines(
    lines: &mut dyn torchx::scheduler::LogLines,
    prefix: &str,
    sink: Sink,
) -> torchx::Result<()> {
    use std::task::Poll;
    const BATCH: usize = 64 * 1024;
    let mut out: Vec<u8> = Vec::with_capacity(2 * BATCH);
    let mut batch: Vec<u8> = Vec::with_capacity(BATCH);
    let result = loop {
        batch.clear();
        let more = {
            let mut next = lines.next_lines(&mut batch);
            match std::future::poll_fn(|cx| Poll::Ready(next.as_mut().poll(cx))).await {
                Poll::Ready(more) => more,
                Poll::Pending => {
                    sink.write(&out);
                    out.clear();
                    next.await
                }
            }
        };
        match more {
            Ok(true) => {
                let mut start = 0;
                for end in memchr::memchr_iter(b'\n', &batch) {
                    out.extend_from_slice(prefix.as_bytes());
                    out.push(b' ');
                    out.extend_from_slice(&batch[start..=end]);
                    start = end + 1;
                }
                if out.len() >= BATCH {
                    sink.write(&out);
                    out.clear();
                }
            }
            Ok(false) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    sink.write(&out);
    result
}

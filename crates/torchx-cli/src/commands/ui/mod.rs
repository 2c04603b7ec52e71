//! `torchx ui`: a dashboard over every job the user has — local ones from the ledger and those of
//! the schedulers in `.torchxconfig` (or `-s`) — with its groups, attempts, pipelines and logs.
//!
//! An axum server on loopback; its page (`assets/`, plain JavaScript that builds every element
//! from text, never from markup) is embedded in the binary and talks to the JSON API in
//! [`api`]. [`guard`] decides who may ask; [`logs`] streams a log from its tail.

mod api;
pub mod guard;
mod logs;

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::Router;
use clap::Args;
use torchx::{Error, Result, Runner};

use crate::exit_codes;

#[derive(Debug, Args)]
pub struct UiArgs {
    /// The address to serve on (loopback unless told otherwise).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// The port (0: a free one).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Open the page in a browser.
    #[arg(long)]
    pub open: bool,
    /// Offer no way to change a job (no cancel, delete or rerun).
    #[arg(long = "read_only")]
    pub read_only: bool,
    /// Serve cancel, delete and rerun on an address other machines reach (plain HTTP: anyone
    /// on the network who learns the token can use them). Without it, only with --read_only.
    #[arg(long = "allow_remote_changes")]
    pub allow_remote_changes: bool,
    /// The schedulers whose jobs to show besides local_cwd's, comma-separated (default: those
    /// with a section in .torchxconfig).
    #[arg(short = 's', long, value_name = "S1,S2,...")]
    pub scheduler: Option<String>,
}

/// What every handler shares.
pub struct Ui {
    runner: Runner,
    /// The schedulers whose jobs the jobs page lists (local_cwd first).
    schedulers: Vec<String>,
    read_only: bool,
    /// The server's token, which the page (holding only the cookie) sends with its changes.
    token: String,
}

/// `torchx ui`.
pub fn ui(a: UiArgs) -> Result<i32> {
    let runner = super::runner()?;
    let schedulers = schedulers(&runner, a.scheduler.as_deref())?;
    let ip: IpAddr = match a.host.as_str() {
        "localhost" => IpAddr::from([127, 0, 0, 1]),
        host => host.parse().map_err(|_| {
            Error::arg(format!(
                "--host `{host}` is not an IP address (e.g. 127.0.0.1, ::1, 0.0.0.0) or localhost"
            ))
        })?,
    };
    if !ip.is_loopback() {
        let host = &a.host;
        if !a.read_only && !a.allow_remote_changes {
            return Err(Error::arg(format!(
                "--host {host} would serve cancel, delete and rerun beyond this machine over \
                 plain HTTP; give --read_only to serve the dashboard without them, or \
                 --allow_remote_changes to serve them anyway"
            )));
        }
        eprintln!(
            "torchx ui: warning: serving on {host} over plain HTTP: whoever reaches this port \
             and learns the token can {}",
            if a.read_only {
                "read your jobs and their logs"
            } else {
                "read, cancel, delete and rerun your jobs"
            }
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::io("starting the dashboard's runtime", e))?;
    let ui = Ui {
        runner,
        schedulers,
        read_only: a.read_only,
        token: guard::new_token()?,
    };
    runtime.block_on(serve(ui, SocketAddr::new(ip, a.port), &a.host, a.open))
}

/// The schedulers to list: local_cwd (the ledger), then those named with `-s` or, without it,
/// those with a section in `.torchxconfig` and the configured default.
fn schedulers(runner: &Runner, named: Option<&str>) -> Result<Vec<String>> {
    let known = runner.registry().all_names();
    let mut out = vec!["local_cwd".to_string()];
    let mut add = |name: &str| {
        if !out.iter().any(|s| s == name) {
            out.push(name.to_string());
        }
    };
    match named {
        Some(list) => {
            for name in super::split_list(list) {
                if !known.contains(&name) {
                    return Err(Error::arg(format!(
                        "-s: no scheduler `{name}`; the schedulers are: {}",
                        known.join(", ")
                    )));
                }
                add(&name);
            }
        }
        None => {
            if let Some(default) = runner.config().cli_run().scheduler {
                add(&default);
            }
            for name in &known {
                if !runner.config().section(name).is_empty() {
                    add(name);
                }
            }
        }
    }
    out.retain(|s| known.contains(s));
    Ok(out)
}

async fn serve(ui: Ui, addr: SocketAddr, host: &str, open: bool) -> Result<i32> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::io(format!("listening on {addr}"), e))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Error::io("reading the dashboard's address", e))?;
    let mut hosts = vec![host.to_string(), bound.ip().to_string()];
    if bound.ip().is_loopback() || bound.ip().is_unspecified() {
        hosts.extend(["localhost", "127.0.0.1", "::1"].map(String::from));
    }
    let guard = Arc::new(guard::Guard {
        token: ui.token.clone(),
        hosts,
        port: bound.port(),
        any_address: bound.ip().is_unspecified(),
    });
    let url_host = match bound.ip() {
        IpAddr::V6(ip) if host != "localhost" => format!("[{ip}]"),
        _ if host == "localhost" => "localhost".into(),
        ip => ip.to_string(),
    };
    let url = format!("http://{url_host}:{}/?token={}", bound.port(), guard.token);
    // The first line on stdout, as tests and scripts read it.
    println!("torchx ui: {url}");
    let _ = std::io::stdout().flush();
    eprintln!(
        "torchx ui: listing jobs of {}{}; Ctrl-C to stop",
        ui.schedulers.join(", "),
        if ui.read_only { " (read-only)" } else { "" }
    );
    let opened = open.then(|| open_browser(&url, bound.port())).flatten();
    let app = router(Arc::new(ui), guard);
    let mut interrupts = super::Interrupts::install()?;
    tokio::select! {
        served = axum::serve(listener, app) => {
            served.map_err(|e| Error::io("serving the dashboard", e))?;
        }
        // Log streams that follow a running job never end by themselves: stop at once.
        () = interrupts.recv() => eprintln!("torchx ui: stopped"),
    }
    if let Some(page) = opened {
        let _ = std::fs::remove_file(page);
    }
    Ok(exit_codes::OK)
}

fn router(ui: Arc<Ui>, guard: Arc<guard::Guard>) -> Router {
    let mut api = Router::new()
        .route("/api/info", get(api::info))
        .route("/api/apps", get(api::apps))
        .route("/api/apps/{*handle}", get(api::app))
        .route("/api/logs/{*handle}", get(logs::stream));
    api = if ui.read_only {
        let refuse = || async {
            (
                StatusCode::FORBIDDEN,
                "torchx ui: this dashboard is read-only\n",
            )
        };
        api.route("/api/cancel", post(refuse))
            .route("/api/delete", post(refuse))
            .route("/api/rerun", post(refuse))
    } else {
        api.route("/api/cancel", post(api::cancel))
            .route("/api/delete", post(api::delete))
            .route("/api/rerun", post(api::rerun))
    };
    api.route("/", get(|| asset("text/html; charset=utf-8", INDEX)))
        .route(
            "/app.js",
            get(|| asset("text/javascript; charset=utf-8", APP_JS)),
        )
        .route(
            "/app.css",
            get(|| asset("text/css; charset=utf-8", APP_CSS)),
        )
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .fallback(|| async { (StatusCode::NOT_FOUND, "torchx ui: no such page\n") })
        .with_state(ui)
        .layer(axum::middleware::from_fn_with_state(guard, guard::check))
}

const INDEX: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

async fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, content_type)], body)
}

/// `--open`: the desktop's browser, if there is one to ask (a failure only says so). It is
/// handed a private page (0600, in a 0700 directory of the state directory) that redirects to
/// the dashboard, as Jupyter does, never the address itself: a command line, token included,
/// is readable by every local user. Returns the page, removed when the server stops.
fn open_browser(url: &str, port: u16) -> Option<std::path::PathBuf> {
    let page = torchx::schedulers::default_state_dir()
        .join("ui")
        .join(format!("open-{port}.html"));
    if let Err(e) = write_private(&page, &redirect_page(url)) {
        eprintln!("torchx ui: could not open a browser ({e}); open the address above");
        return None;
    }
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let spawned = std::process::Command::new(opener)
        .arg(&page)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(e) = spawned {
        eprintln!("torchx ui: could not open a browser ({opener}: {e}); open the address above");
    }
    Some(page)
}

/// A page that sends the browser on to `url` at once (and offers a link where it does not).
fn redirect_page(url: &str) -> String {
    // The address is ours: a host, a port and a URL-safe token; escaped all the same.
    let url = url
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;");
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n\
         <meta http-equiv=\"refresh\" content=\"0;url={url}\"><title>torchx ui</title></head>\n\
         <body><p><a href=\"{url}\">Open the torchx dashboard</a></p></body></html>\n"
    )
}

/// Writes `text` to a file only its owner can read, in a directory only its owner can enter
/// (made so even if it was there before).
fn write_private(path: &std::path::Path, text: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    torchx::schedulers::create_private_dir(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| Error::io(format!("making {} private", dir.display()), e))?;
    torchx::schedulers::write_private_file(path, text.as_bytes())
}

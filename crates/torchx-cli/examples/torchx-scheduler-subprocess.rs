//! An example scheduler plugin: `torchx-scheduler-subprocess` on PATH makes `torchx run -s
//! subprocess ...` run every replica as a detached local process. It speaks protocol version 1
//! of docs/scheduler-plugins.md using nothing but serde_json, as a plugin in any language would,
//! and passes torchx's scheduler conformance suite (crates/torchx-cli/tests/plugins.rs).
//!
//! Build and install: `cargo install --path crates/torchx-cli --example torchx-scheduler-subprocess`.
//! State lives under `$TORCHX_SUBPROCESS_ROOT` (default `$TMPDIR/torchx-subprocess-$USER`):
//! `<app_id>/app.json`, and per replica `<app_id>/<role>/<k>/{pid,exit,log}`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

const PROTOCOL: u64 = 1;

/// A failed operation: an error kind of the protocol and a message for the user.
struct Failure(&'static str, String);

type Answer = Result<Value, Failure>;

fn main() {
    let mut input = String::new();
    let answer = match std::io::stdin().read_to_string(&mut input) {
        Ok(_) => match serde_json::from_str::<Value>(&input) {
            Ok(req) => handle(&req),
            Err(e) => Err(Failure(
                "invalid_argument",
                format!("request is not JSON: {e}"),
            )),
        },
        Err(e) => Err(Failure("backend", format!("cannot read the request: {e}"))),
    };
    match answer {
        Ok(v) => send(json!({ "protocol": PROTOCOL, "ok": v })),
        Err(Failure(kind, message)) => send(json!({
            "protocol": PROTOCOL, "error": { "kind": kind, "message": message }
        })),
    }
}

fn send(message: Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{message}");
    let _ = out.flush();
}

fn handle(req: &Value) -> Answer {
    if req["protocol"].as_u64() != Some(PROTOCOL) {
        return Err(Failure(
            "unsupported",
            format!(
                "this plugin speaks protocol {PROTOCOL}, got {}",
                req["protocol"]
            ),
        ));
    }
    let app_id = req["app_id"].as_str().unwrap_or_default();
    match req["op"].as_str().unwrap_or_default() {
        "info" => Ok(info()),
        "dryrun" => dryrun(req),
        "schedule" => schedule(&req["request"]),
        "describe" => describe(app_id),
        "list" => list(),
        "cancel" => cancel(app_id),
        "delete" => delete(app_id),
        "log_lines" => log_lines(req),
        op => Err(Failure("unsupported", format!("unknown operation `{op}`"))),
    }
}

fn info() -> Value {
    json!({
        "description": "Runs every replica as a detached local process (example plugin)",
        "capabilities": {
            "describe_replicas": true, "list": true, "cancel": true, "delete": true,
            "logs": true, "log_tail": true, "retries": true, "multi_role": true,
        },
        "run_opts": [
            { "name": "env", "type": "dict", "required": false,
              "help": "extra environment variables for every replica (K:V,K2:V2)" },
        ],
    })
}

fn root() -> PathBuf {
    match std::env::var_os("TORCHX_SUBPROCESS_ROOT") {
        Some(r) if !r.is_empty() => PathBuf::from(r),
        _ => std::env::temp_dir().join(format!(
            "torchx-subprocess-{}",
            std::env::var("USER").unwrap_or_else(|_| "default".into())
        )),
    }
}

fn app_dir(app_id: &str) -> Result<PathBuf, Failure> {
    // App ids come back from users: no path tricks.
    if app_id.is_empty() || app_id.starts_with('.') || app_id.contains('/') {
        return Err(Failure(
            "invalid_argument",
            format!("invalid app id `{app_id}`"),
        ));
    }
    Ok(root().join(app_id))
}

fn io(what: &str, e: std::io::Error) -> Failure {
    Failure("backend", format!("{what}: {e}"))
}

/// Pure: the processes to start, with TorchX's macros substituted.
fn dryrun(req: &Value) -> Answer {
    let app = &req["app"];
    let name = app["name"].as_str().unwrap_or("app");
    let unique = req["context"]["unique"].as_str().unwrap_or_default();
    let app_id = format!("{name}-{unique}");
    let extra_env = req["cfg"]["env"].as_object().cloned().unwrap_or_default();
    let mut replicas = Vec::new();
    let mut rendered = format!(
        "app {app_id} in {}\n",
        req["context"]["cwd"].as_str().unwrap_or(".")
    );
    for role in app["roles"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let role_name = role["name"].as_str().unwrap_or_default();
        let image = role["image"].as_str().unwrap_or_default();
        let n = role["num_replicas"].as_u64().unwrap_or(1);
        for k in 0..n {
            let subst = |s: &str| {
                s.replace("${app_id}", &app_id)
                    .replace("${replica_id}", &k.to_string())
                    .replace("${img_root}", image)
                    .replace("${rank0_env}", "TORCHX_RANK0_HOST")
            };
            let mut argv = vec![subst(role["entrypoint"].as_str().unwrap_or_default())];
            for a in role["args"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                argv.push(subst(a.as_str().unwrap_or_default()));
            }
            let mut env: BTreeMap<String, String> = BTreeMap::new();
            for (key, v) in extra_env
                .iter()
                .chain(role["env"].as_object().into_iter().flatten())
            {
                env.insert(key.clone(), subst(v.as_str().unwrap_or_default()));
            }
            env.insert("TORCHX_RANK0_HOST".into(), "localhost".into());
            rendered.push_str(&format!("  {role_name}/{k}: {argv:?}\n"));
            replicas.push(json!({
                "role": role_name, "k": k, "argv": argv, "env": env,
                "max_retries": role["max_retries"].as_u64().unwrap_or(0),
            }));
        }
    }
    let request = json!({
        "app_id": app_id, "name": name, "cwd": req["context"]["cwd"], "replicas": replicas,
    });
    Ok(json!({ "request": request, "rendered": rendered }))
}

/// Retries in the shell that waits for the replica, then records its exit code atomically.
const WRAPPER: &str = r#"tries=0
while :; do
  "$@"; rc=$?
  if [ "$rc" -eq 0 ] || [ "$tries" -ge "$TORCHX_SUBPROCESS_RETRIES" ]; then break; fi
  tries=$((tries + 1))
  echo "$tries" > "$TORCHX_SUBPROCESS_DIR/restarts"
done
echo "$rc" > "$TORCHX_SUBPROCESS_DIR/exit.tmp" && mv "$TORCHX_SUBPROCESS_DIR/exit.tmp" "$TORCHX_SUBPROCESS_DIR/exit""#;

fn schedule(request: &Value) -> Answer {
    let app_id = request["app_id"].as_str().unwrap_or_default();
    let dir = app_dir(app_id)?;
    std::fs::create_dir_all(root()).map_err(|e| io("creating the state root", e))?;
    std::fs::create_dir(&dir).map_err(|e| io(&format!("creating {}", dir.display()), e))?;
    let replicas = request["replicas"].as_array().cloned().unwrap_or_default();
    let mut roles: Vec<(String, u64)> = Vec::new();
    for r in &replicas {
        let role = r["role"].as_str().unwrap_or_default().to_string();
        match roles.iter_mut().find(|(n, _)| *n == role) {
            Some(entry) => entry.1 += 1,
            None => roles.push((role, 1)),
        }
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let meta = json!({ "name": request["name"], "start_time": now.as_secs_f64(), "roles": roles });
    std::fs::write(dir.join("app.json"), meta.to_string())
        .map_err(|e| io("writing app.json", e))?;
    for r in &replicas {
        let rdir = dir
            .join(r["role"].as_str().unwrap_or_default())
            .join(r["k"].to_string());
        std::fs::create_dir_all(&rdir).map_err(|e| io("creating a replica dir", e))?;
        let log = std::fs::File::create(rdir.join("log")).map_err(|e| io("creating a log", e))?;
        let log2 = log.try_clone().map_err(|e| io("opening a log", e))?;
        let argv: Vec<&str> = r["argv"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(WRAPPER).arg("sh").args(&argv);
        if let Some(cwd) = request["cwd"].as_str() {
            cmd.current_dir(cwd);
        }
        for (k, v) in r["env"].as_object().into_iter().flatten() {
            cmd.env(k, v.as_str().unwrap_or_default());
        }
        // Its own process group (cancel kills the group) and no pipe back to torchx.
        let child = cmd
            .env("TORCHX_SUBPROCESS_DIR", &rdir)
            .env("TORCHX_SUBPROCESS_RETRIES", r["max_retries"].to_string())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .process_group(0)
            .spawn()
            .map_err(|e| io("starting a replica", e))?;
        std::fs::write(rdir.join("pid"), child.id().to_string())
            .map_err(|e| io("writing a pid", e))?;
    }
    Ok(json!({ "app_id": app_id }))
}

fn alive(pid: &str) -> bool {
    // A zombie (`Z`) has exited; anything else under /proc is running.
    std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

fn replica_state(rdir: &Path, cancelled: bool) -> &'static str {
    if let Ok(code) = std::fs::read_to_string(rdir.join("exit")) {
        return if code.trim() == "0" {
            "SUCCEEDED"
        } else {
            "FAILED"
        };
    }
    match std::fs::read_to_string(rdir.join("pid")) {
        Ok(pid) if alive(&pid) => "RUNNING",
        _ if cancelled => "CANCELLED",
        _ => "FAILED",
    }
}

fn read_app(app_id: &str) -> Result<Option<(PathBuf, Value)>, Failure> {
    let dir = app_dir(app_id)?;
    match std::fs::read_to_string(dir.join("app.json")) {
        Ok(s) => Ok(Some((dir, serde_json::from_str(&s).unwrap_or_default()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("reading app.json", e)),
    }
}

fn describe(app_id: &str) -> Answer {
    let Some((dir, meta)) = read_app(app_id)? else {
        return Ok(Value::Null);
    };
    let cancelled = dir.join("cancelled").exists();
    let mut states = Vec::new();
    let mut roles = Vec::new();
    let mut restarts = 0;
    for role in meta["roles"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let name = role[0].as_str().unwrap_or_default();
        let mut replicas = Vec::new();
        for k in 0..role[1].as_u64().unwrap_or(0) {
            let rdir = dir.join(name).join(k.to_string());
            let state = replica_state(&rdir, cancelled);
            let tried = std::fs::read_to_string(rdir.join("restarts")).unwrap_or_default();
            restarts = restarts.max(tried.trim().parse::<i64>().unwrap_or(0));
            states.push(state);
            replicas.push(json!({ "id": k, "state": state, "hostname": "localhost" }));
        }
        roles.push(json!({ "role": name, "replicas": replicas }));
    }
    let state = if states.contains(&"RUNNING") {
        "RUNNING"
    } else if cancelled {
        "CANCELLED"
    } else if states.contains(&"FAILED") {
        "FAILED"
    } else {
        "SUCCEEDED"
    };
    Ok(
        json!({ "app_id": app_id, "state": state, "roles": roles, "num_restarts": restarts, "ui_url": format!("file://{}", dir.display()) }),
    )
}

fn list() -> Answer {
    let mut apps = Vec::new();
    let Ok(entries) = std::fs::read_dir(root()) else {
        return Ok(json!([]));
    };
    for e in entries.flatten() {
        let app_id = e.file_name().to_string_lossy().into_owned();
        if let (Some((_, meta)), Ok(d)) = (read_app(&app_id)?, describe(&app_id)) {
            apps.push(json!({
                "app_id": app_id, "state": d["state"], "name": meta["name"],
                "start_time": meta["start_time"],
            }));
        }
    }
    Ok(Value::Array(apps))
}

fn not_found(app_id: &str) -> Failure {
    Failure(
        "not_found",
        format!("no app `{app_id}` under {}", root().display()),
    )
}

fn pids(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for role in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        for replica in std::fs::read_dir(role.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if let Ok(pid) = std::fs::read_to_string(replica.path().join("pid")) {
                out.push(pid.trim().to_string());
            }
        }
    }
    out
}

fn cancel(app_id: &str) -> Answer {
    let Some((dir, _)) = read_app(app_id)? else {
        return Err(not_found(app_id));
    };
    std::fs::write(dir.join("cancelled"), "").map_err(|e| io("marking the app cancelled", e))?;
    for pid in pids(&dir) {
        if alive(&pid) {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
        }
    }
    Ok(Value::Null)
}

fn delete(app_id: &str) -> Answer {
    cancel(app_id)?;
    let dir = app_dir(app_id)?;
    std::fs::remove_dir_all(&dir).map_err(|e| io(&format!("removing {}", dir.display()), e))?;
    Ok(Value::Null)
}

/// Streams `{"line": ...}` messages, then answers `ok` (written by `main`).
fn log_lines(req: &Value) -> Answer {
    let app_id = req["app_id"].as_str().unwrap_or_default();
    let Some((dir, _)) = read_app(app_id)? else {
        return Err(not_found(app_id));
    };
    let role = req["role"].as_str().unwrap_or_default();
    let rdir = dir.join(role).join(req["k"].to_string());
    let file = std::fs::File::open(rdir.join("log")).map_err(|_| {
        Failure(
            "invalid_argument",
            format!("app `{app_id}` has no replica {role}/{}", req["k"]),
        )
    })?;
    send(json!({ "protocol": PROTOCOL, "streaming": true }));
    let follow = req["should_tail"].as_bool().unwrap_or(false);
    let mut reader = BufReader::new(file);
    let mut pending = String::new();
    let mut finished = false;
    loop {
        let n = reader
            .read_line(&mut pending)
            .map_err(|e| io("reading the log", e))?;
        if pending.ends_with('\n') {
            send(json!({ "protocol": PROTOCOL, "line": pending.trim_end_matches('\n') }));
            pending.clear();
        } else if n == 0 {
            // The end of what is written so far.
            if finished || !follow {
                if !pending.is_empty() {
                    send(json!({ "protocol": PROTOCOL, "line": pending }));
                }
                return Ok(Value::Null);
            }
            if replica_state(&rdir, dir.join("cancelled").exists()) == "RUNNING" {
                std::thread::sleep(Duration::from_millis(50));
            } else {
                finished = true; // one more pass for what it wrote before exiting
            }
        }
    }
}

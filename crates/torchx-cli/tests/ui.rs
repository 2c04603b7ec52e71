//! `torchx ui` over HTTP: who may ask (token, cookie, Host, POST with the header from this
//! origin, read-only), what the API answers for real local_cwd jobs, groups and pipelines, and
//! logs that start from their tail. The page itself is driven in a real browser by
//! python/tests/test_ui_browser.py.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use support::ui_server::{encode, request, Server};
use support::{stderr, Env};

fn ok(env: &Env, args: &[&str]) -> String {
    let out = env.run(args);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    support::stdout(&out).trim().to_string()
}

#[test]
fn every_path_refuses_a_request_without_this_servers_token() {
    let env = Env::new();
    let handle = ok(&env, &["run", "utils.echo", "--msg", "hi"]);
    let handle = handle.lines().next().unwrap().to_string();
    let (a, b) = (Server::start(&env, &[]), Server::start(&env, &[]));
    assert_ne!(a.token, b.token);
    let h = encode(&handle);
    let paths = [
        "/".to_string(),
        "/app.js".into(),
        "/app.css".into(),
        "/api/info".into(),
        "/api/apps".into(),
        format!("/api/apps/{h}"),
        format!("/api/logs/{h}"),
        "/no/such/page".into(),
    ];
    let host = format!("Host: {}", a.addr);
    for path in &paths {
        let none = request(&a.addr, "GET", path, &[&host], "");
        assert_eq!(none.status, 401, "{path} without a token: {none:?}");
        assert!(!none.body.contains(&handle), "{path} leaked: {}", none.body);
        let wrong = format!("Cookie: torchx_ui_{}=0123", a.port());
        assert_eq!(
            request(&a.addr, "GET", path, &[&host, &wrong], "").status,
            403,
            "{path}"
        );
        // The other server's token, in the cookie or the URL.
        let other = format!("Cookie: torchx_ui_{}={}", a.port(), b.token);
        assert_eq!(
            request(&a.addr, "GET", path, &[&host, &other], "").status,
            403,
            "{path}"
        );
        let sep = if path.contains('?') { '&' } else { '?' };
        let other_url = format!("{path}{sep}token={}", b.token);
        assert_eq!(
            request(&a.addr, "GET", &other_url, &[&host], "").status,
            403,
            "{path}"
        );
        // DNS rebinding: the right token under a foreign name.
        let rebound = request(
            &a.addr,
            "GET",
            path,
            &["Host: evil.example", &a.cookie()],
            "",
        );
        assert_eq!(rebound.status, 403, "{path}");
        let good = a.get(path);
        let expected = if path == "/no/such/page" { 404 } else { 200 };
        assert_eq!(good.status, expected, "{path}: {}", good.body);
        for reply in [&none, &good] {
            assert!(
                reply.header("access-control-allow-origin").is_none(),
                "{path}"
            );
            assert!(reply.header("content-security-policy").is_some(), "{path}");
        }
    }
    // The token in the URL becomes this server's cookie, and leaves the address bar.
    let first = request(
        &a.addr,
        "GET",
        &format!("/?token={}", a.token),
        &[&host],
        "",
    );
    assert_eq!(first.status, 303);
    assert_eq!(first.header("location"), Some("/"));
    let cookie = first.header("set-cookie").unwrap();
    assert!(
        cookie.starts_with(&format!("torchx_ui_{}={};", a.port(), a.token)),
        "{cookie}"
    );
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
}

#[test]
fn changes_need_a_post_with_the_token_header_from_this_page() {
    let env = Env::new();
    let handle = env.detach(&["utils.sh", "--", "sleep", "300"]);
    let ui = Server::start(&env, &[]);
    let body = serde_json::json!({ "handle": handle }).to_string();
    let host = format!("Host: {}", ui.addr);
    let cookie = ui.cookie();
    let token = format!("X-Torchx-Token: {}", ui.token);
    // A GET never changes anything; other methods are refused.
    assert_eq!(ui.get("/api/cancel").status, 405);
    let options = request(&ui.addr, "OPTIONS", "/api/cancel", &[&host, &cookie], "");
    assert_eq!(options.status, 405);
    // The cookie alone is what a cross-site form sends.
    let cookie_only = request(&ui.addr, "POST", "/api/cancel", &[&host, &cookie], &body);
    assert_eq!(cookie_only.status, 401);
    let foreign = request(
        &ui.addr,
        "POST",
        "/api/cancel",
        &[&host, &cookie, &token, "Origin: http://evil.example"],
        &body,
    );
    assert_eq!(foreign.status, 403);
    let cross_site = request(
        &ui.addr,
        "POST",
        "/api/cancel",
        &[&host, &cookie, &token, "Sec-Fetch-Site: cross-site"],
        &body,
    );
    assert_eq!(cross_site.status, 403);
    assert_eq!(env.status(&handle)["state"], "RUNNING");
    let done = ui.post("/api/cancel", &handle);
    assert_eq!(done.status, 200, "{}", done.body);
    env.wait_state(&handle, "CANCELLED", Duration::from_secs(20));
    support::assert_no_processes(&handle);
    // Unknown handles and bad bodies are specific errors.
    let unknown = ui.post("/api/cancel", "local_cwd://torchx/no-such-app");
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    assert!(unknown.body.contains("no-such-app"), "{}", unknown.body);
    let delete = ui.post("/api/delete", &handle);
    assert_eq!(delete.status, 200, "{}", delete.body);
    assert_eq!(
        ui.get(&format!("/api/apps/{}", encode(&handle))).status,
        404
    );
}

#[test]
fn a_read_only_dashboard_offers_no_change() {
    let env = Env::new();
    let handle = env.detach(&["utils.sh", "--", "sleep", "300"]);
    let ui = Server::start(&env, &["--read_only"]);
    assert_eq!(ui.json("/api/info")["read_only"], true);
    for path in ["/api/cancel", "/api/delete", "/api/rerun"] {
        let r = ui.post(path, &handle);
        assert_eq!(r.status, 403, "{path}: {}", r.body);
    }
    assert_eq!(env.status(&handle)["state"], "RUNNING");
    ok(&env, &["cancel", &handle]);
}

fn wait_json(
    ui: &Server,
    path: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let start = Instant::now();
    loop {
        let v = ui.json(path);
        if done(&v) {
            return v;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{path}: {v:#}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_api_shows_jobs_groups_and_pipelines_with_their_states() {
    let env = Env::new();
    let succeeded = ok(&env, &["run", "utils.echo", "--msg", "hi"]);
    let succeeded = succeeded.lines().next().unwrap().to_string();
    let failed = env.run(&["run", "utils.sh", "--", "sh", "-c", "exit 3"]);
    let failed = support::stdout(&failed).lines().next().unwrap().to_string();
    let running = env.detach(&["utils.sh", "--", "sleep", "300"]);
    let group = env.detach(&[
        "--array",
        "3%1",
        "utils.sh",
        "--",
        "sh",
        "-c",
        "exit $TORCHX_ARRAY_INDEX",
    ]);
    std::fs::write(
        env.cwd.join("pipe.yaml"),
        "name: two\nsteps:\n  - {name: a, component: utils.sh, args: [true]}\n  \
         - {name: b, component: utils.sh, args: [false], after: [a]}\n",
    )
    .unwrap();
    let out = env.run(&["run", "pipe.yaml"]);
    let pipeline = support::stdout(&out)
        .lines()
        .chain(stderr(&out).lines())
        .find_map(|l| {
            l.split_whitespace()
                .find(|w| w.starts_with("pipeline://"))
                .map(String::from)
        })
        .unwrap_or_else(|| panic!("{}", stderr(&out)));

    let ui = Server::start(&env, &[]);
    // The capped group submits its tasks one after the other.
    wait_json(&ui, &format!("/api/apps/{}", encode(&group)), |v| {
        v["state"] == "FAILED"
    });
    let apps = ui.json("/api/apps");
    let row = |h: &str| {
        apps["apps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["handle"] == h)
            .unwrap_or_else(|| panic!("{h} not in {apps:#}"))
            .clone()
    };
    assert_eq!(row(&succeeded)["state"], "SUCCEEDED");
    assert_eq!(row(&failed)["state"], "FAILED");
    assert_eq!(row(&running)["state"], "RUNNING");
    assert_eq!(row(&running)["scheduler"], "local_cwd");
    assert_eq!(row(&group)["kind"], "group");
    assert_eq!(row(&group)["state"], "FAILED");
    assert_eq!(row(&pipeline)["kind"], "pipeline");
    assert_eq!(row(&pipeline)["state"], "FAILED");
    // A group's or pipeline's members are folded into its row, as in `torchx list`.
    assert_eq!(apps["apps"].as_array().unwrap().len(), 5, "{apps:#}");

    let app = ui.json(&format!("/api/apps/{}?full=true", encode(&failed)));
    assert_eq!(app["kind"], "app");
    let attempt = &app["roles"][0]["replicas"][0]["attempts"][0];
    assert_eq!(attempt["exit_code"], 3, "{app:#}");
    assert_eq!(attempt["reason"], "failed", "{app:#}");
    assert!(
        app["appdef"].as_str().unwrap().contains("exit 3"),
        "{app:#}"
    );
    assert!(app["native"]["text"].as_str().is_some(), "{app:#}");
    let g = ui.json(&format!("/api/apps/{}", encode(&group)));
    assert_eq!(g["kind"], "group");
    assert_eq!(g["counts"]["SUCCEEDED"], 1, "{g:#}");
    assert_eq!(g["counts"]["FAILED"], 2, "{g:#}");
    let p = ui.json(&format!("/api/apps/{}", encode(&pipeline)));
    assert_eq!(p["kind"], "pipeline");
    assert_eq!(p["steps"][1]["after"][0], "a", "{p:#}");
    assert_eq!(p["steps"][1]["state"], "FAILED", "{p:#}");

    // A live change shows in the next answer.
    ok(&env, &["cancel", &running]);
    wait_json(&ui, &format!("/api/apps/{}", encode(&running)), |v| {
        v["state"] == "CANCELLED"
    });
    // rerun --failed of the group: a new group of its two failed tasks.
    let rerun = ui.post("/api/rerun", &group);
    assert_eq!(rerun.status, 200, "{}", rerun.body);
    let again = ui.post("/api/rerun", &succeeded);
    assert_eq!(again.status, 400, "{}", again.body);
}

#[test]
fn a_log_starts_from_its_tail_and_follows_as_text() {
    let env = Env::new();
    let handle = env.detach(&[
        "utils.sh",
        "--",
        "sh",
        "-c",
        "seq 1 200000; echo '<img src=x onerror=alert(1)></script>'; sleep 2; echo late",
    ]);
    let ui = Server::start(&env, &[]);
    let path = format!("/api/logs/{}?lines=3&follow=true", encode(&handle));
    let reply = ui.get(&path);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        reply.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(reply.header("x-content-type-options"), Some("nosniff"));
    let lines: Vec<&str> = reply.body.lines().collect();
    assert_eq!(
        lines,
        [
            "199999",
            "200000",
            "<img src=x onerror=alert(1)></script>",
            "late"
        ],
        "{}",
        reply.body
    );
    // Searching is the scheduler's regex over the whole log.
    let found = ui.get(&format!(
        "/api/logs/{}?regex=%5E1999%5B0-9%5D%24&lines=2",
        encode(&handle)
    ));
    assert_eq!(found.body, "19998\n19999\n");
    let bad = ui.get(&format!("/api/logs/{}?regex=(", encode(&handle)));
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(bad.body.contains("regex"), "{}", bad.body);
    let role = ui.get(&format!("/api/logs/{}?role=nope", encode(&handle)));
    assert!(role.status >= 400, "{role:?}");
}

#[test]
fn bad_options_are_named() {
    let env = Env::new();
    let out = env.run(&["ui", "--host", "not-an-address"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--host `not-an-address`"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["ui", "-s", "local_cwd,nope"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no scheduler `nope`"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("slurm"), "{}", stderr(&out));
}

/// `--open` hands the browser a private redirect page, never the token in an argument (which
/// every local user can read in /proc/<pid>/cmdline).
#[test]
fn open_hands_the_browser_a_private_page_not_the_token() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    let bin = env.cwd.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let record = env.cwd.join("opened");
    let stub = bin.join("xdg-open");
    std::fs::write(
        &stub,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$0\" \"$@\" > {0}.tmp && mv {0}.tmp {0}\n",
            record.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = env.cmd(&["ui", "--port", "0", "--open"]);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    cmd.env("PATH", path);
    let ui = Server::spawn(cmd);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !record.exists() {
        assert!(Instant::now() < deadline, "xdg-open was never run");
        std::thread::sleep(Duration::from_millis(20));
    }
    let argv = std::fs::read_to_string(&record).unwrap();
    assert!(
        !argv.contains(&ui.token),
        "the token is in an argument: {argv}"
    );
    let page = std::path::PathBuf::from(argv.lines().nth(1).unwrap());
    assert!(page.starts_with(&env.state), "{}", page.display());
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&page), 0o600);
    assert_eq!(mode(page.parent().unwrap()), 0o700);
    let html = std::fs::read_to_string(&page).unwrap();
    let url = format!("http://{}/?token={}", ui.addr, ui.token);
    assert!(html.contains(&format!("content=\"0;url={url}\"")), "{html}");
    drop(ui);
}

/// Beyond loopback, cancel, delete and rerun would go over plain HTTP: refused unless
/// `--read_only` (or `--allow_remote_changes`), and then a warning says what is exposed.
#[test]
fn a_non_loopback_address_is_refused_unless_read_only_or_allowed() {
    let env = Env::new();
    let out = env.run(&["ui", "--host", "0.0.0.0", "--port", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    for flag in ["--read_only", "--allow_remote_changes", "0.0.0.0"] {
        assert!(stderr(&out).contains(flag), "{flag}: {}", stderr(&out));
    }
    for (flag, exposed) in [
        ("--read_only", "read your jobs"),
        ("--allow_remote_changes", "cancel, delete and rerun"),
    ] {
        let mut child = env
            .cmd(&["ui", "--host", "0.0.0.0", "--port", "0", flag])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("torchx ui: http://"), "{flag}: {line}");
        child.kill().unwrap();
        let out = child.wait_with_output().unwrap();
        let err = stderr(&out);
        assert!(
            err.contains("warning: serving on 0.0.0.0 over plain HTTP"),
            "{err}"
        );
        assert!(err.contains(exposed), "{flag}: {err}");
    }
}

#[test]
fn ctrl_c_stops_the_server_even_while_a_log_is_followed() {
    let env = Env::new();
    let handle = env.detach(&["utils.sh", "--", "sh", "-c", "echo started; sleep 300"]);
    let mut ui = Server::start(&env, &[]);
    let mut follower = TcpStream::connect(&ui.addr).unwrap();
    let path = format!("/api/logs/{}?follow=true", encode(&handle));
    write!(
        follower,
        "GET {path} HTTP/1.1\r\nHost: {}\r\n{}\r\n\r\n",
        ui.addr,
        ui.cookie()
    )
    .unwrap();
    let mut first = [0u8; 512];
    let n = follower.read(&mut first).unwrap();
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
    let killed = std::process::Command::new("kill")
        .args(["-INT", &ui.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let start = Instant::now();
    let status = loop {
        if let Some(s) = ui.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "still serving after Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));
    ok(&env, &["cancel", &handle]);
}

/// The page inserts what jobs say only as text: none of the DOM calls that parse markup, and
/// no inline script or style (the Content-Security-Policy would refuse them anyway).
#[test]
fn the_page_never_parses_markup() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/commands/ui/assets");
    let js = std::fs::read_to_string(dir.join("app.js")).unwrap();
    for call in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "DOMParser",
        "createContextualFragment",
        "eval(",
        "new Function",
    ] {
        assert!(!js.contains(call), "app.js uses {call}");
    }
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(
        !html.contains("<script>") && !html.contains("style="),
        "{html}"
    );
}

/// Without `-s`, the schedulers with a section in `.torchxconfig` are listed beside local_cwd;
/// one that cannot answer is named in `errors` while the others still show.
#[test]
fn the_configured_schedulers_are_listed_and_a_silent_one_is_named() {
    let env = Env::new();
    std::fs::write(env.cwd.join(".torchxconfig"), "[lsf]\nqueue = nowhere\n").unwrap();
    let handle = ok(&env, &["run", "utils.echo", "--msg", "hi"]);
    let handle = handle.lines().next().unwrap().to_string();
    // No LSF here: its commands are missing from PATH.
    let mut cmd = env.cmd(&["ui", "--port", "0"]);
    cmd.env("PATH", "/nonexistent");
    let ui = Server::spawn(cmd);
    assert_eq!(
        ui.json("/api/info")["schedulers"],
        serde_json::json!(["local_cwd", "lsf"])
    );
    let apps = ui.json("/api/apps");
    assert_eq!(apps["apps"][0]["handle"], handle.as_str(), "{apps:#}");
    assert_eq!(apps["errors"][0]["scheduler"], "lsf", "{apps:#}");
}

/// The dashboard restarts a pipeline's dead holder as the CLI does (one library function): a
/// pipeline whose holder was killed goes on when only the page looks at it.
#[test]
fn the_dashboard_restarts_a_dead_pipeline_holder() {
    let env = Env::new();
    std::fs::write(
        env.cwd.join("pipe.yaml"),
        "name: slow\nsteps:\n  - {name: a, component: utils.sh, args: [sleep, '1']}\n  \
         - {name: b, component: utils.sh, args: [true], after: [a]}\n",
    )
    .unwrap();
    let pipeline = ok(&env, &["run", "--detach", "pipe.yaml"]);
    let holders = || {
        let out = std::process::Command::new("pgrep")
            .args(["-f", &format!("__pipeline {pipeline}$")])
            .output()
            .unwrap();
        support::stdout(&out)
            .lines()
            .map(|l| l.trim().to_string())
            .collect::<Vec<_>>()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while holders().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no holder started");
        std::thread::sleep(Duration::from_millis(20));
    }
    for pid in holders() {
        std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status()
            .unwrap();
    }
    let ui = Server::start(&env, &[]);
    let done = wait_json(&ui, &format!("/api/apps/{}", encode(&pipeline)), |v| {
        v["state"] == "SUCCEEDED"
    });
    assert_eq!(done["steps"][1]["state"], "SUCCEEDED", "{done}");
}

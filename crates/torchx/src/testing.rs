//! The scheduler conformance suite (cargo feature `testing`): one set of checks that every
//! scheduler runs, in-tree and out-of-tree, choosing what to check from its [`Capabilities`].
//!
//! ```ignore
//! let runner = Runner::new(registry, TorchxConfig::default());
//! let mut opts = Conformance::new("busybox");
//! opts.timeout = std::time::Duration::from_secs(120);
//! torchx::testing::conformance(&runner, "my_scheduler", &opts).await;
//! ```
//!
//! Every check panics with `conformance[<scheduler>] <check>: <what went wrong>`.

use std::time::Duration;

use crate::error::ErrorKind;
use crate::opts::Cfg;
use crate::runner::{RunArgs, Runner};
use crate::scheduler::{Capabilities, LogQuery};
use crate::specs::{AppDef, AppState, Role};

/// How to run the suite against one scheduler: [`Conformance::new`] (or `default()`, with
/// `busybox`), then set the fields that differ. New settings may come with new checks, so
/// the struct cannot be built literally outside this crate.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Conformance {
    /// The image the test apps run in (needs `sh`, `echo`, `sleep`).
    pub image: String,
    /// Run options for every submission.
    pub cfg: Cfg,
    /// How long an app may take to reach a terminal state.
    pub timeout: Duration,
    /// How often to poll the state.
    pub poll: Duration,
    /// The test apps' resource, for schedulers that need one (default: none, TorchX's
    /// NULL_RESOURCE).
    pub resource: Option<crate::specs::Resource>,
    /// Whether the test apps' commands really run (false for emulators and fake API servers
    /// that only move jobs through their states): the checks of what a command does (its two
    /// streams, retries of a failing command, a mount's contents) need it. Without it, the
    /// test must still make the logs of the apps the suite reads appear (`ok`: its echo;
    /// `tail`: two echoed lines while it runs), as the engine would.
    pub runs_commands: bool,
    /// A host directory the scheduler's replicas can bind-mount (the `mounts` check writes a
    /// file there and reads it from the app); `None` skips that check.
    pub mount_dir: Option<std::path::PathBuf>,
    /// Whether `cancel` forgets the app, as TorchX's `kubernetes_mcad` (it deletes the
    /// AppWrapper) does, rather than leaving it CANCELLED.
    pub cancel_forgets: bool,
    /// Whether the `retries` check runs: false where the engine retries only after a delay
    /// longer than `timeout` (MCAD requeues an AppWrapper 300 s after dispatch at the earliest).
    pub check_retries: bool,
}

impl Conformance {
    /// The defaults, with the test apps in `image`.
    pub fn new(image: impl Into<String>) -> Conformance {
        Conformance {
            image: image.into(),
            ..Conformance::default()
        }
    }
}

impl Default for Conformance {
    fn default() -> Self {
        Conformance {
            image: "busybox".into(),
            cfg: Cfg::new(),
            timeout: Duration::from_secs(60),
            poll: Duration::from_millis(50),
            resource: None,
            runs_commands: true,
            mount_dir: None,
            cancel_forgets: false,
            check_retries: true,
        }
    }
}

struct Suite<'a> {
    runner: &'a Runner,
    scheduler: &'a str,
    opts: &'a Conformance,
    sched: std::sync::Arc<dyn crate::scheduler::Scheduler>,
    caps: Capabilities,
}

impl Suite<'_> {
    fn fail(&self, check: &str, what: impl std::fmt::Display) -> ! {
        panic!("conformance[{}] {check}: {what}", self.scheduler)
    }

    /// A one-role test app running `sh -c script` in the suite's image.
    fn app(&self, name: &str, script: &str) -> AppDef {
        AppDef::new(name, vec![self.role("main", script)])
    }

    fn role(&self, name: &str, script: &str) -> Role {
        let mut role = Role::new(name, &self.opts.image)
            .with_entrypoint("sh")
            .with_args(["-c", script]);
        if let Some(r) = &self.opts.resource {
            role.resource = r.clone();
        }
        role
    }

    /// Every log line of `handle`'s replica main/0 for `query`, within the suite's timeout.
    async fn lines(&self, check: &str, handle: &str, query: &LogQuery) -> Vec<String> {
        let read = async {
            let mut lines = self
                .runner
                .log_lines(handle, "main", 0, query)
                .await
                .unwrap_or_else(|e| self.fail(check, e));
            let mut all = Vec::new();
            while let Some(l) = lines
                .next_line()
                .await
                .unwrap_or_else(|e| self.fail(check, e))
            {
                all.push(l);
            }
            all
        };
        tokio::time::timeout(self.opts.timeout, read)
            .await
            .unwrap_or_else(|_| self.fail(check, "the log did not end with the app"))
    }

    /// Removes a finished test app where the scheduler can (nothing of the suite stays behind).
    async fn forget(&self, handle: &str) {
        if self.caps.delete {
            let _ = self.runner.delete(handle).await;
        }
    }

    /// The stream the test apps' `echo` reaches where streams can be chosen.
    fn stdout_query(&self) -> LogQuery {
        LogQuery {
            streams: self
                .caps
                .log_streams
                .then_some(crate::specs::Stream::Stdout),
            ..LogQuery::default()
        }
    }

    async fn submit(&self, check: &str, app: AppDef) -> String {
        let info = self
            .runner
            .dryrun(app, self.scheduler, &self.opts.cfg, &RunArgs::default())
            .await
            .unwrap_or_else(|e| self.fail(check, format!("dryrun failed: {e}")));
        self.runner
            .schedule(&info)
            .await
            .map(String::from)
            .unwrap_or_else(|e| self.fail(check, format!("schedule failed: {e}")))
    }

    /// The status of an app the check submitted (it must still be known).
    async fn status_of(&self, check: &str, handle: &str) -> crate::specs::AppStatus {
        self.runner
            .status(handle)
            .await
            .unwrap_or_else(|e| self.fail(check, e))
            .unwrap_or_else(|| self.fail(check, format!("{handle} vanished")))
    }

    async fn final_state(&self, check: &str, handle: &str) -> AppState {
        match self
            .runner
            .wait(handle, self.opts.poll, Some(self.opts.timeout))
            .await
        {
            Ok(Some(s)) => s.state,
            Ok(None) => self.fail(check, format!("{handle} vanished while waiting")),
            Err(e) => self.fail(check, format!("waiting for {handle}: {e}")),
        }
    }

    /// `app`'s request in both forms, text and JSON (a plugin's text may summarise its JSON),
    /// rendered with a fixed context.
    fn request_of(&self, check: &str, what: &str, app: &AppDef) -> String {
        let sched = &self.sched;
        let cfg = sched
            .run_opts()
            .resolve(&self.opts.cfg)
            .unwrap_or_else(|e| self.fail(check, e));
        let ctx = crate::scheduler::DryRunContext::new("s", "fixed", "/work");
        let request = sched
            .submit_dryrun(app, &cfg, &ctx)
            .unwrap_or_else(|e| self.fail(check, format!("{what}: {e}")));
        format!("{}\n{}", request.render(), request.to_json())
    }

    fn dryrun_is_deterministic(&self) {
        let check = "dryrun_is_deterministic";
        let app = self.app("det", "echo hi");
        if self.request_of(check, "a dry run", &app) != self.request_of(check, "a dry run", &app) {
            self.fail(check, "two dry runs of the same inputs differ");
        }
    }

    /// What a dry run shows of the claimed `mounts`, `retries` and `multi_role`: each changes
    /// the request (a claimed feature is never dropped on the way), and a mount's target is
    /// named in it. The only evidence where the engine runs no command (emulators, fake API
    /// servers); elsewhere the checks that run apps follow.
    fn claims_reach_the_request(&self) {
        let check = "claims_reach_the_request";
        let render = |what: &str, app: &AppDef| self.request_of(check, what, app);
        let plain = self.app("claims", "echo hi");
        let base = render("the plain app", &plain);
        let mut variants = Vec::new();
        if self.caps.mounts {
            let mut app = plain.clone();
            app.roles[0].mounts = vec![crate::specs::Mount::Bind {
                src_path: "/tmp".into(),
                dst_path: "/conformance-claims-mnt".into(),
                read_only: true,
            }];
            let with = render("a bind mount", &app);
            if !with.contains("/conformance-claims-mnt") {
                self.fail(
                    check,
                    format!("the mount's target is not in the request: {with}"),
                );
            }
            variants.push(("a bind mount", with));
        }
        if self.caps.retries {
            let mut app = plain.clone();
            app.roles[0].max_retries = 2;
            variants.push(("max_retries=2", render("max_retries=2", &app)));
        }
        if self.caps.multi_role {
            let mut app = plain.clone();
            app.roles.push(self.role("side", "echo hi"));
            variants.push(("a second role", render("a second role", &app)));
        }
        for (what, request) in variants {
            if request == base {
                self.fail(check, format!("{what} left the request unchanged: {base}"));
            }
        }
    }

    async fn unknown_apps_are_not_found(&self) {
        let check = "unknown_apps_are_not_found";
        let handle = format!("{}://torchx/conformance-missing-0", self.scheduler);
        match self.runner.status(&handle).await {
            Ok(None) => {}
            other => self.fail(check, format!("status of an unknown app: {other:?}")),
        }
        if self.caps.cancel {
            match self.runner.cancel(&handle).await {
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                other => self.fail(check, format!("cancel of an unknown app: {other:?}")),
            }
        }
        if self.caps.logs {
            match self
                .runner
                .log_lines(&handle, "main", 0, &LogQuery::default())
                .await
            {
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => self.fail(check, format!("logs of an unknown app: {e}")),
                Ok(_) => self.fail(check, "logs of an unknown app returned lines"),
            }
        }
    }

    async fn success_failure_logs_list_delete(&self) {
        let check = "success";
        let ok = self
            .submit(check, self.app("ok", "echo conformance-ok"))
            .await;
        let state = self.final_state(check, &ok).await;
        if state != AppState::Succeeded {
            self.fail(check, format!("{ok} ended {state}"));
        }
        let check = "failure";
        let bad = self.submit(check, self.app("bad", "exit 3")).await;
        let state = self.final_state(check, &bad).await;
        if state != AppState::Failed {
            self.fail(check, format!("{bad} ended {state}, expected FAILED"));
        }
        if self.caps.logs {
            let check = "logs";
            // The echo went to stdout; schedulers differ in their default stream.
            let all = self.lines(check, &ok, &self.stdout_query()).await;
            if !all.iter().any(|l| l.contains("conformance-ok")) {
                self.fail(check, format!("the output is missing from {all:?}"));
            }
            let check = "logs_regex";
            let query = LogQuery {
                regex: Some(regex::Regex::new("^nothing-matches-this$").expect("valid regex")),
                ..self.stdout_query()
            };
            let none = self.lines(check, &ok, &query).await;
            if !none.is_empty() {
                self.fail(check, format!("a regex matching nothing kept {none:?}"));
            }
            if self.caps.log_since_until {
                let check = "logs_since_until";
                let day = Duration::from_secs(86400);
                let after = LogQuery {
                    since: Some(std::time::SystemTime::now() + day),
                    ..self.stdout_query()
                };
                let before = LogQuery {
                    until: Some(std::time::UNIX_EPOCH + day),
                    ..self.stdout_query()
                };
                for (what, query) in [("since tomorrow", after), ("until 1970", before)] {
                    let kept = self.lines(check, &ok, &query).await;
                    if !kept.is_empty() {
                        self.fail(check, format!("{what} kept {kept:?}"));
                    }
                }
            }
        }
        if self.caps.list {
            let check = "list";
            let listed = self
                .runner
                .list(self.scheduler)
                .await
                .unwrap_or_else(|e| self.fail(check, e));
            for h in [&ok, &bad] {
                if !listed.iter().any(|a| &a.app_handle == h) {
                    self.fail(check, format!("{h} is not listed"));
                }
            }
        }
        if self.caps.delete {
            let check = "delete";
            for h in [&ok, &bad] {
                self.runner
                    .delete(h)
                    .await
                    .unwrap_or_else(|e| self.fail(check, e));
                match self.runner.status(h).await {
                    Ok(None) => {}
                    other => self.fail(check, format!("{h} still known after delete: {other:?}")),
                }
            }
        }
    }

    async fn cancel_stops_a_running_app(&self) {
        let check = "cancel";
        let h = self.submit(check, self.app("long", "sleep 600")).await;
        self.runner
            .cancel(&h)
            .await
            .unwrap_or_else(|e| self.fail(check, e));
        if self.opts.cancel_forgets {
            match self.runner.status(&h).await {
                Ok(None) => return,
                other => self.fail(check, format!("{h} still known after cancel: {other:?}")),
            }
        }
        let state = self.final_state(check, &h).await;
        if state != AppState::Cancelled {
            self.fail(check, format!("{h} ended {state}, expected CANCELLED"));
        }
        self.forget(&h).await;
    }
}

impl Suite<'_> {
    /// `describe_replicas` and `multi_role`: every replica of every role is reported.
    async fn roles_and_replicas(&self) {
        let check = "roles_and_replicas";
        let mut main = self.role("main", "echo conformance-main");
        main.num_replicas = 2;
        let mut roles = vec![main];
        if self.caps.multi_role {
            roles.push(self.role("side", "echo conformance-side"));
        }
        let h = self.submit(check, AppDef::new("roles", roles)).await;
        let state = self.final_state(check, &h).await;
        if state != AppState::Succeeded {
            self.fail(check, format!("{h} ended {state}"));
        }
        if self.caps.describe_replicas {
            let status = self.status_of(check, &h).await;
            // A one-role scheduler may not know the role's name (the AWS emulator's SageMaker
            // returns no job environment): there, every replica reported is role main's.
            let multi = self.caps.multi_role;
            let ids = |role: &str| -> Vec<u32> {
                let mut ids: Vec<u32> = status
                    .roles
                    .iter()
                    .filter(|r| !multi || r.role == role)
                    .flat_map(|r| r.replicas.iter().map(|x| x.id))
                    .collect();
                ids.sort_unstable();
                ids
            };
            if ids("main") != [0, 1] {
                self.fail(check, format!("role main's replicas: {:?}", status.roles));
            }
            if self.caps.multi_role && ids("side") != [0] {
                self.fail(check, format!("role side's replicas: {:?}", status.roles));
            }
        }
        self.forget(&h).await;
    }

    /// `log_streams`: stdout and stderr apart.
    async fn log_streams(&self) {
        let check = "log_streams";
        let h = self
            .submit(check, self.app("streams", "echo to-out; echo to-err >&2"))
            .await;
        self.final_state(check, &h).await;
        for (stream, want, not) in [
            (crate::specs::Stream::Stdout, "to-out", "to-err"),
            (crate::specs::Stream::Stderr, "to-err", "to-out"),
        ] {
            let query = LogQuery {
                streams: Some(stream),
                ..LogQuery::default()
            };
            let lines = self.lines(check, &h, &query).await;
            if !lines.iter().any(|l| l.contains(want)) || lines.iter().any(|l| l.contains(not)) {
                self.fail(check, format!("{stream:?} of {h}: {lines:?}"));
            }
        }
        self.forget(&h).await;
    }

    /// `log_tail`: a log followed from the start ends with the app and holds its last line.
    async fn log_tail(&self) {
        let check = "log_tail";
        let h = self
            .submit(
                check,
                self.app("tail", "echo tail-first; sleep 2; echo tail-last"),
            )
            .await;
        let query = LogQuery {
            should_tail: true,
            ..self.stdout_query()
        };
        let lines = self.lines(check, &h, &query).await;
        let has = |w: &str| lines.iter().any(|l| l.contains(w));
        if !has("tail-first") || !has("tail-last") {
            self.fail(check, format!("followed log of {h}: {lines:?}"));
        }
        self.final_state(check, &h).await;
        self.forget(&h).await;
    }

    /// `retries`: a command that always fails is retried, then FAILED. (`max_retries` 2: TorchX
    /// maps it to Batch's `retryStrategy.attempts`, first attempt included.)
    async fn retries(&self) {
        let check = "retries";
        let mut app = self.app("retry", "exit 3");
        app.roles[0].max_retries = 2;
        let h = self.submit(check, app).await;
        let state = self.final_state(check, &h).await;
        if state != AppState::Failed {
            self.fail(check, format!("{h} ended {state}, expected FAILED"));
        }
        let status = self.status_of(check, &h).await;
        if status.num_restarts < 1 {
            self.fail(check, format!("{h} was not retried: {status:?}"));
        }
        self.forget(&h).await;
    }

    /// `mounts`: a bind-mounted host directory is readable from the app.
    async fn mounts(&self, dir: &std::path::Path) {
        let check = "mounts";
        let probe = format!("mounted-{}", crate::scheduler::random_id());
        std::fs::write(dir.join("probe"), &probe).unwrap_or_else(|e| self.fail(check, e));
        let mut app = self.app("mounts", "cat /conformance-mnt/probe");
        app.roles[0].mounts = vec![crate::specs::Mount::Bind {
            src_path: dir.display().to_string(),
            dst_path: "/conformance-mnt".into(),
            read_only: true,
        }];
        let h = self.submit(check, app).await;
        let state = self.final_state(check, &h).await;
        if state != AppState::Succeeded {
            self.fail(check, format!("{h} ended {state}"));
        }
        if self.caps.logs {
            let lines = self.lines(check, &h, &self.stdout_query()).await;
            if !lines.iter().any(|l| l.contains(&probe)) {
                self.fail(
                    check,
                    format!("{h} did not read the mounted file: {lines:?}"),
                );
            }
        }
        self.forget(&h).await;
    }
}

/// Runs every check that `scheduler`'s capabilities call for.
pub async fn conformance(runner: &Runner, scheduler: &str, opts: &Conformance) {
    let sched = runner
        .scheduler(scheduler)
        .await
        .unwrap_or_else(|e| panic!("conformance[{scheduler}]: {e}"));
    let suite = Suite {
        runner,
        scheduler,
        opts,
        caps: sched.capabilities(),
        sched,
    };
    suite.dryrun_is_deterministic();
    suite.claims_reach_the_request();
    suite.unknown_apps_are_not_found().await;
    suite.success_failure_logs_list_delete().await;
    if suite.caps.cancel {
        suite.cancel_stops_a_running_app().await;
    }
    if suite.caps.describe_replicas || suite.caps.multi_role {
        suite.roles_and_replicas().await;
    }
    if suite.caps.logs && suite.caps.log_tail {
        suite.log_tail().await;
    }
    if opts.runs_commands {
        if suite.caps.logs && suite.caps.log_streams {
            suite.log_streams().await;
        }
        if suite.caps.retries && opts.check_retries {
            suite.retries().await;
        }
        if let (true, Some(dir)) = (suite.caps.mounts, &opts.mount_dir) {
            suite.mounts(dir).await;
        }
    }
}

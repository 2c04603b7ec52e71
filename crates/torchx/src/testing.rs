//! The scheduler conformance suite (cargo feature `testing`): one set of checks that every
//! scheduler runs, in-tree and out-of-tree, choosing what to check from its [`Capabilities`].
//!
//! ```ignore
//! let runner = Runner::new(registry, TorchxConfig::default());
//! torchx::testing::conformance(&runner, "my_scheduler", &Conformance::default()).await;
//! ```
//!
//! Every check panics with `conformance[<scheduler>] <check>: <what went wrong>`.

use std::time::Duration;

use crate::opts::Cfg;
use crate::runner::{RunArgs, Runner};
use crate::scheduler::{Capabilities, LogQuery};
use crate::specs::{AppDef, AppState, Role};
use crate::Error;

/// How to run the suite against one scheduler.
#[derive(Debug, Clone)]
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
}

impl Default for Conformance {
    fn default() -> Self {
        Conformance {
            image: "busybox".into(),
            cfg: Cfg::new(),
            timeout: Duration::from_secs(60),
            poll: Duration::from_millis(50),
            resource: None,
        }
    }
}

struct Suite<'a> {
    runner: &'a Runner,
    scheduler: &'a str,
    opts: &'a Conformance,
    caps: Capabilities,
}

impl Suite<'_> {
    fn fail(&self, check: &str, what: impl std::fmt::Display) -> ! {
        panic!("conformance[{}] {check}: {what}", self.scheduler)
    }

    /// A one-role test app running `sh -c script` in the suite's image.
    fn app(&self, name: &str, script: &str) -> AppDef {
        let mut role = Role::new("main", &self.opts.image)
            .with_entrypoint("sh")
            .with_args(["-c", script]);
        if let Some(r) = &self.opts.resource {
            role.resource = r.clone();
        }
        AppDef::new(name, vec![role])
    }

    async fn submit(&self, check: &str, app: AppDef) -> String {
        let info = self
            .runner
            .dryrun(app, self.scheduler, &self.opts.cfg, &RunArgs::default())
            .unwrap_or_else(|e| self.fail(check, format!("dryrun failed: {e}")));
        self.runner
            .schedule(&info)
            .await
            .unwrap_or_else(|e| self.fail(check, format!("schedule failed: {e}")))
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

    fn dryrun_is_deterministic(&self) {
        let check = "dryrun_is_deterministic";
        let sched = self
            .runner
            .scheduler(self.scheduler)
            .unwrap_or_else(|e| self.fail(check, e));
        let app = self.app("det", "echo hi");
        let cfg = sched
            .run_opts()
            .resolve(&self.opts.cfg)
            .unwrap_or_else(|e| self.fail(check, e));
        let ctx = crate::scheduler::DryRunContext::new("s", "fixed", "/work");
        let render = || {
            sched
                .submit_dryrun(&app, &cfg, &ctx)
                .unwrap_or_else(|e| self.fail(check, e))
                .render()
        };
        if render() != render() {
            self.fail(check, "two dry runs of the same inputs differ");
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
                Err(Error::NotFound { .. }) => {}
                other => self.fail(check, format!("cancel of an unknown app: {other:?}")),
            }
        }
        if self.caps.logs {
            match self
                .runner
                .log_lines(&handle, "main", 0, &LogQuery::default())
                .await
            {
                Err(Error::NotFound { .. }) => {}
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
            let query = LogQuery {
                streams: self
                    .caps
                    .log_streams
                    .then_some(crate::specs::Stream::Stdout),
                ..LogQuery::default()
            };
            let mut lines = self
                .runner
                .log_lines(&ok, "main", 0, &query)
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
            if !all.iter().any(|l| l.contains("conformance-ok")) {
                self.fail(check, format!("the output is missing from {all:?}"));
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
        let state = self.final_state(check, &h).await;
        if state != AppState::Cancelled {
            self.fail(check, format!("{h} ended {state}, expected CANCELLED"));
        }
    }
}

/// Runs every check that `scheduler`'s capabilities call for.
pub async fn conformance(runner: &Runner, scheduler: &str, opts: &Conformance) {
    let caps = runner
        .scheduler(scheduler)
        .unwrap_or_else(|e| panic!("conformance[{scheduler}]: {e}"))
        .capabilities();
    let suite = Suite {
        runner,
        scheduler,
        opts,
        caps,
    };
    suite.dryrun_is_deterministic();
    suite.unknown_apps_are_not_found().await;
    suite.success_failure_logs_list_delete().await;
    if caps.cancel {
        suite.cancel_stops_a_running_app().await;
    }
}

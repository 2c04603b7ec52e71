//! A scheduler written outside the torchx crate, against its public API only: a `Backend` that
//! "runs" each app by recording it in memory and answers `describe` from there. CI compiles
//! and runs it, so the extension API stays usable from other crates (a struct literal of the
//! `#[non_exhaustive]` `Capabilities` would not compile here: its const builders do).
//!
//! Run: `cargo run -p torchx --example custom_backend`

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use torchx::config::TorchxConfig;
use torchx::opts::{Cfg, TypedOpts};
use torchx::scheduler::{
    Backend, Capabilities, DryRunContext, DryRunInfo, NativeRequest, Registry, Scheduler,
};
use torchx::specs::{AppDef, AppState, DescribeAppResponse, Role};
use torchx::{run_opts, Result, Runner};

run_opts! {
    /// Run options of the `memory` scheduler.
    pub struct MemoryOpts {
        /// a queue name, recorded with the app
        queue: Option<String>,
    }
}

/// The native request: what would be sent to a real cluster.
#[derive(Debug, Clone)]
struct MemoryJob {
    app_id: String,
    queue: String,
    commands: Vec<String>,
}

impl NativeRequest for MemoryJob {
    fn render(&self) -> String {
        format!("queue {}: {}", self.queue, self.commands.join("; "))
    }
    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"app_id": self.app_id, "queue": self.queue, "commands": self.commands})
    }
}

#[derive(Debug, Default)]
struct MemoryScheduler {
    jobs: Mutex<BTreeMap<String, MemoryJob>>,
}

#[async_trait]
impl Backend for MemoryScheduler {
    const NAME: &'static str = "memory";
    const CAPABILITIES: Capabilities = Capabilities::NONE.with_describe_replicas(false);
    type Opts = MemoryOpts;
    type Request = MemoryJob;
    type Facts = ();

    fn render(
        &self,
        app: &AppDef,
        opts: &MemoryOpts,
        ctx: &DryRunContext,
        _facts: Option<&()>,
    ) -> Result<MemoryJob> {
        Ok(MemoryJob {
            app_id: ctx.make_unique(&app.name),
            queue: opts.queue.clone().unwrap_or_else(|| "default".into()),
            commands: app
                .roles
                .iter()
                .map(|r| format!("{} {}", r.entrypoint, r.args.join(" ")))
                .collect(),
        })
    }

    async fn submit(&self, job: &MemoryJob, _info: &DryRunInfo) -> Result<String> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.insert(job.app_id.clone(), job.clone());
        Ok(job.app_id.clone())
    }

    async fn describe(&self, app_id: &str) -> Result<Option<DescribeAppResponse>> {
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        Ok(jobs
            .get(app_id)
            .map(|_| DescribeAppResponse::new(app_id, AppState::Succeeded)))
    }

    async fn cancel(&self, _app_id: &str) -> Result<()> {
        Ok(())
    }
}

fn main() -> Result<()> {
    let mut registry = Registry::empty();
    registry.register("memory", "apps kept in memory", || {
        Ok(Arc::new(MemoryScheduler::default()) as Arc<dyn Scheduler>)
    })?;
    // A second registration under the same name is refused, never a silent replacement.
    assert!(registry
        .register("memory", "again", || Err(torchx::Error::arg("unused")))
        .is_err());
    let runner = Runner::new(registry, TorchxConfig::default());
    let app = AppDef::new(
        "hello",
        vec![Role::new("main", "unused")
            .with_entrypoint("echo")
            .with_args(["hi"])],
    );
    let cfg: Cfg = MemoryOpts::schema().parse_cli("queue=fast")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| torchx::Error::io("starting a runtime", e))?;
    runtime.block_on(async {
        let handle = runner.run(app, "memory", &cfg, &Default::default()).await?;
        let status = runner.status(&handle).await?;
        println!("{handle}: {:?}", status.map(|s| s.state));
        Ok(())
    })
}

//! A platform team's own `torchx` binary: the standard CLI plus a named resource, a component, a
//! scheduler and a tracker registered next to the builtins (nothing builtin is replaced; a
//! clashing name is an error at start). Tested in crates/torchx-cli/tests/custom_binary.rs.
//!
//! In your crate: depend on `torchx` and `torchx-cli`, then write a `main` like this one.

use std::sync::Arc;

use torchx::components::{Component, Param, ParamDefault, ParamType};
use torchx::scheduler::Scheduler;
use torchx::specs::{AppDef, Resource, Role};
use torchx::tracker::FsspecTracker;
use torchx::tracker::Tracker;
use torchx::Extensions;

fn hello() -> Component {
    let params = vec![
        Param::new(
            "who",
            ParamType::Str,
            ParamDefault::Value("world".into()),
            "whom to greet",
        ),
        Param::new(
            "h",
            ParamType::Str,
            ParamDefault::Value("acme.small".into()),
            "named resource",
        ),
    ];
    Component::new(
        "acme.hello",
        "Greets someone, on an acme.small",
        params,
        "acme",
        |args, env| {
            let role = Role::new("hello", "ghcr.io/acme/base:1")
                .with_entrypoint("echo")
                .with_args([format!("hello {}", args.str("who"))])
                .with_resource(env.resource(args.str("h"))?);
            Ok(AppDef::new("hello", vec![role]))
        },
    )
}

fn main() {
    let ext = Extensions::builtin()
        .named_resource("acme.small", Resource::new(2, 0, 4096))
        .component(hello())
        // Your own `Scheduler` implementation goes here; the example reuses local_cwd's.
        .scheduler(
            "acme_local",
            "Local processes, the acme way (example)",
            || {
                let s: Arc<dyn Scheduler> = torchx::schedulers::local_cwd::create()?;
                Ok(s)
            },
        )
        // A tracker whose config is simply the root directory of an fsspec layout.
        .tracker("acme", |config| {
            let root = config.unwrap_or("/var/lib/acme/tracker");
            Ok(Box::new(FsspecTracker::new(root)?) as Box<dyn Tracker>)
        });
    torchx_cli::main(ext)
}

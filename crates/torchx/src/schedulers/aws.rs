//! What `aws_batch` and `aws_sagemaker` share: torchx's tags on jobs, the submitting user (a dry
//! run fact), and loading aws-config's chain (credentials, region, `AWS_ENDPOINT_URL`).

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::scheduler::DryRunContext;
use crate::specs::AppDef;

/// Tag with the torchx version (`aws_batch list` keeps only jobs that carry it).
pub const TAG_VERSION: &str = "torchx.pytorch.org/version";
/// Tag with the AppDef name.
pub const TAG_APP_NAME: &str = "torchx.pytorch.org/app-name";
/// Tag with the submitting user.
pub const TAG_USER: &str = "torchx.pytorch.org/user";
/// The fact carrying the submitting user (`$USER`), gathered outside the pure dry run.
pub const FACT_USER: &str = "user";

/// The dry-run facts: the submitting user (TorchX's `getpass.getuser()`).
pub fn user_facts() -> BTreeMap<String, String> {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_default();
    BTreeMap::from([(FACT_USER.to_string(), user)])
}

/// torchx's tags (version, app name, user: the `user` option, else the fact), then the AppDef's
/// metadata.
pub fn job_tags(app: &AppDef, user: Option<&str>, ctx: &DryRunContext) -> BTreeMap<String, String> {
    let user = user
        .map(str::to_string)
        .or_else(|| ctx.facts.get(FACT_USER).cloned())
        .unwrap_or_default();
    let mut tags = BTreeMap::from([
        (TAG_VERSION.to_string(), crate::VERSION.to_string()),
        (TAG_APP_NAME.to_string(), app.name.clone()),
        (TAG_USER.to_string(), user),
    ]);
    tags.extend(app.metadata.clone());
    tags
}

/// aws-config's defaults and the region they resolve to (an error naming `scheduler` if none).
pub async fn load_config(scheduler: &str) -> Result<(aws_config::SdkConfig, String)> {
    let conf = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let region = conf.region().map(|r| r.to_string()).ok_or_else(|| {
        Error::backend(
            scheduler,
            "no AWS region configured (set AWS_REGION or a profile's region)",
        )
    })?;
    Ok((conf, region))
}

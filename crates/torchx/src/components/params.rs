//! What the builtins share: their common parameters (image, resources, env, mounts) and how
//! their arguments become a role's parts.

use super::{ComponentArgs, ComponentEnv, Param, ParamDefault as D, ParamType as T};
use crate::error::{Error, Result};
use crate::specs::{parse_mounts, resource, AppDef, Env, Mount, Resource, Role, DEFAULT_IMAGE};

pub(super) fn p(name: &str, ty: T, default: D, help: &str) -> Param {
    Param::new(name, ty, default, help)
}
pub(super) fn v(s: &str) -> D {
    D::Value(s.to_string())
}
pub(super) fn image(help: &str) -> Param {
    p("image", T::Str, v(DEFAULT_IMAGE), help)
}
pub(super) fn resource_params() -> Vec<Param> {
    vec![
        p("cpu", T::Int, v("1"), "number of cpus per replica"),
        p("gpu", T::Int, v("0"), "number of gpus per replica"),
        p("memMB", T::Int, v("1024"), "cpu memory in MB per replica"),
        p(
            "h",
            T::Str,
            D::Absent,
            "a registered named resource (if specified takes precedence over cpu, gpu, memMB)",
        ),
    ]
}
pub(super) const ENV_HELP: &str =
    "environment varibles to be passed to the run (e.g. ENV1=v1,ENV2=v2,ENV3=v3)";
pub(super) const METADATA_HELP: &str =
    "metadata to be passed to the scheduler (e.g. KEY1=v1,KEY2=v2,KEY3=v3)";
pub(super) const MOUNTS_HELP: &str = "mounts to mount into the worker environment/container (ex. type=<bind/volume>,src=/host,dst=/job[,readonly]). See scheduler documentation for more info.";

pub(super) fn args_resource(a: &ComponentArgs, env: &ComponentEnv) -> Result<Resource> {
    match a.opt_str("h") {
        Some(h) => env.resource(h),
        None => resource(a.opt_int("cpu"), a.opt_int("gpu"), a.opt_int("memMB"), None),
    }
}

pub(super) fn args_mounts(a: &ComponentArgs, env: &ComponentEnv) -> Result<Vec<Mount>> {
    match a.list("mounts") {
        Some(m) if !m.is_empty() => parse_mounts(m, env.home.as_deref()),
        _ => Ok(Vec::new()),
    }
}

pub(super) fn loglevel(env: &mut Env, cenv: &ComponentEnv) {
    env.entry("LOGLEVEL".into())
        .or_insert_with(|| cenv.loglevel.clone().unwrap_or_else(|| "WARNING".into()));
}

pub(super) fn replicas(a: &ComponentArgs) -> Result<u32> {
    let n = a.int("num_replicas");
    u32::try_from(n).ok().filter(|n| *n > 0).ok_or_else(|| {
        Error::arg(format!(
            "`--num_replicas` must be a positive integer, got {n}"
        ))
    })
}

/// A one-role app.
pub(super) fn single(name: &str, role: Role) -> AppDef {
    AppDef::new(name, vec![role])
}

/// A count argument: zero or more.
pub(super) fn non_negative(a: &ComponentArgs, name: &str) -> Result<u32> {
    let n = a.int(name);
    u32::try_from(n).map_err(|_| Error::arg(format!("`--{name}` must be zero or more, got {n}")))
}

//! An app's description and the apps of a listing, crossing as typed objects (the roles as
//! plain values in their AppDef shape, which the package reads as it reads a dry run's).

use pyo3::prelude::*;
use torchx::specs::{
    Attempt, DescribeAppResponse, ListAppResponse, ReplicaStatus, Role, RoleStatus,
};

use crate::data::Data;

/// One attempt of a replica.
#[pyclass(frozen, get_all, module = "torchx._rs")]
#[derive(Clone)]
pub struct AttemptInfo {
    attempt: u32,
    started: Option<f64>,
    ended: Option<f64>,
    exit_code: Option<i32>,
    signal: Option<i32>,
    reason: Option<&'static str>,
}

impl From<&Attempt> for AttemptInfo {
    fn from(a: &Attempt) -> Self {
        AttemptInfo {
            attempt: a.attempt,
            started: a.started,
            ended: a.ended,
            exit_code: a.exit_code,
            signal: a.signal,
            reason: a.reason.map(|r| r.as_str()),
        }
    }
}

/// One replica's status.
#[pyclass(frozen, get_all, module = "torchx._rs")]
#[derive(Clone)]
pub struct ReplicaInfo {
    id: u32,
    state: &'static str,
    role: String,
    hostname: String,
    structured_error_msg: String,
    attempts: Vec<AttemptInfo>,
}

impl From<&ReplicaStatus> for ReplicaInfo {
    fn from(r: &ReplicaStatus) -> Self {
        ReplicaInfo {
            id: r.id,
            state: r.state.as_str(),
            role: r.role.clone(),
            hostname: r.hostname.clone(),
            structured_error_msg: r.structured_error_msg.clone(),
            attempts: r.attempts.iter().map(AttemptInfo::from).collect(),
        }
    }
}

/// A role's replicas.
#[pyclass(frozen, get_all, module = "torchx._rs")]
#[derive(Clone)]
pub struct RoleInfo {
    role: String,
    replicas: Vec<ReplicaInfo>,
}

impl From<&RoleStatus> for RoleInfo {
    fn from(r: &RoleStatus) -> Self {
        RoleInfo {
            role: r.role.clone(),
            replicas: r.replicas.iter().map(ReplicaInfo::from).collect(),
        }
    }
}

/// `Scheduler.describe`'s answer.
#[pyclass(frozen, module = "torchx._rs")]
pub struct Described {
    #[pyo3(get)]
    app_id: String,
    #[pyo3(get)]
    state: &'static str,
    #[pyo3(get)]
    num_restarts: i64,
    #[pyo3(get)]
    msg: String,
    #[pyo3(get)]
    structured_error_msg: String,
    #[pyo3(get)]
    ui_url: Option<String>,
    #[pyo3(get)]
    roles_statuses: Vec<RoleInfo>,
    roles: Vec<Role>,
}

#[pymethods]
impl Described {
    /// The roles in their AppDef shape (a list).
    #[getter]
    fn roles(&self) -> Data<&[Role]> {
        Data(&self.roles)
    }
}

impl From<DescribeAppResponse> for Described {
    fn from(d: DescribeAppResponse) -> Described {
        Described {
            roles_statuses: d.roles_statuses.iter().map(RoleInfo::from).collect(),
            app_id: d.app_id,
            state: d.state.as_str(),
            num_restarts: d.num_restarts,
            msg: d.msg,
            structured_error_msg: d.structured_error_msg,
            ui_url: d.ui_url,
            roles: d.roles,
        }
    }
}

/// One app of `Scheduler.list`.
#[pyclass(frozen, get_all, module = "torchx._rs")]
pub struct Listed {
    app_id: String,
    state: &'static str,
    name: String,
}

impl From<ListAppResponse> for Listed {
    fn from(a: ListAppResponse) -> Self {
        Listed {
            app_id: a.app_id,
            state: a.state.as_str(),
            name: a.name,
        }
    }
}

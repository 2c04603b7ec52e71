//! What `aws_batch` and `aws_sagemaker` share: torchx's tags on jobs, the submitting user (a dry
//! run fact), loading aws-config's chain (credentials, region, `AWS_ENDPOINT_URL`), the SDK's
//! errors as ours, and reading CloudWatch logs (`cloudwatch`).

pub(crate) mod cloudwatch;

use std::collections::BTreeMap;

use aws_sdk_cloudwatchlogs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

use crate::error::{Error, ErrorKind, Result};

use crate::specs::AppDef;

/// Tag with the torchx version (`aws_batch list` keeps only jobs that carry it).
pub(crate) const TAG_VERSION: &str = "torchx.pytorch.org/version";
/// Tag with the AppDef name.
pub(crate) const TAG_APP_NAME: &str = "torchx.pytorch.org/app-name";
/// Tag with the submitting user.
pub(crate) const TAG_USER: &str = "torchx.pytorch.org/user";
/// The dry-run fact of both AWS backends: the submitting user (TorchX's `getpass.getuser()`),
/// read outside the pure dry run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SubmittingUser(pub String);

/// [`SubmittingUser`] from `$USER` (else `$LOGNAME`).
pub(crate) fn user_facts() -> SubmittingUser {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_default();
    SubmittingUser(user)
}

/// The user a job is tagged with: the `user` option, else the submitting user.
pub(crate) fn tagged_user(
    option: &Option<String>,
    facts: Option<&SubmittingUser>,
) -> Option<String> {
    option.clone().or_else(|| facts.map(|f| f.0.clone()))
}

/// torchx's tags (version, app name, user), then the AppDef's metadata.
pub(crate) fn job_tags(app: &AppDef, user: Option<&str>) -> BTreeMap<String, String> {
    let user = user.unwrap_or_default().to_string();
    let mut tags = BTreeMap::from([
        (TAG_VERSION.to_string(), crate::VERSION.to_string()),
        (TAG_APP_NAME.to_string(), app.name.clone()),
        (TAG_USER.to_string(), user),
    ]);
    tags.extend(app.metadata.clone());
    tags
}

/// aws-config's defaults and the region they resolve to (an error naming `scheduler` if none).
pub(crate) async fn load_config(scheduler: &str) -> Result<(aws_config::SdkConfig, String)> {
    let conf = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    // A missing region is the user's configuration, not the backend failing.
    let region = conf.region().map(|r| r.to_string()).ok_or_else(|| {
        Error::config(format!(
            "{scheduler}: no AWS region configured (set AWS_REGION, or a region in the profile \
             of AWS_PROFILE / ~/.aws/config)"
        ))
    })?;
    Ok((conf, region))
}

/// What a caller can do about an AWS error code, where the code says: the credentials were
/// refused, or the service asks to come back later (both AWS backends' table).
pub(crate) fn kind_of_code(code: &str) -> Option<ErrorKind> {
    match code {
        "AccessDeniedException"
        | "AccessDenied"
        | "UnrecognizedClientException"
        | "InvalidSignatureException"
        | "ExpiredTokenException"
        | "UnauthorizedOperation" => Some(ErrorKind::PermissionDenied),
        "ThrottlingException"
        | "TooManyRequestsException"
        | "ServiceUnavailable"
        | "ServerException"
        | "ServiceUnavailableException" => Some(ErrorKind::Unavailable),
        _ => None,
    }
}

/// An AWS SDK error of `scheduler`, kept as the source, classed by what the caller can do about
/// it: the request never got an answer (connection, timeout, throttling, 5xx) → unavailable;
/// the service refused the credentials → permission denied.
pub(crate) fn sdk_err<'a, E, R>(
    scheduler: &'static str,
    what: &'a str,
) -> impl FnOnce(SdkError<E, R>) -> Error + 'a
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    move |e| {
        let kind = match &e {
            SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) => ErrorKind::Unavailable,
            SdkError::ServiceError(s) => {
                kind_of_code(s.err().code().unwrap_or_default()).unwrap_or(ErrorKind::Backend)
            }
            _ => ErrorKind::Backend,
        };
        let message = format!("{what}: {}", DisplayErrorContext(&e));
        Error::backend_caused_by(scheduler, message, kind, e)
    }
}

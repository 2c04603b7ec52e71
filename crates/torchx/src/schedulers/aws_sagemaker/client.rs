//! SageMaker's four calls (CreateTrainingJob, DescribeTrainingJob, ListTrainingJobs,
//! StopTrainingJob) as SigV4-signed awsJson1.1 requests: credentials and region from aws-config's
//! chain (the same as the SDK's), the endpoint from `AWS_ENDPOINT_URL_SAGEMAKER` /
//! `AWS_ENDPOINT_URL` or the regional default, retries with backoff on throttling and 5xx, and
//! AWS error codes mapped to our errors. (aws-sdk-sagemaker would cost minutes of build time for
//! these four calls; see ARCHITECTURE.md.)

use std::time::{Duration, SystemTime};

use aws_credential_types::provider::ProvideCredentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use serde_json::Value;

use crate::error::{Error, ErrorKind, Result};

/// An AWS service error: its code (`ValidationException`, ...) and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsError {
    /// The error code (`ValidationException`, `ResourceInUse`, ...).
    pub code: String,
    /// Its message.
    pub message: String,
    /// The HTTP status.
    pub status: u16,
}

impl std::fmt::Display for AwsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} (HTTP {})", self.code, self.message, self.status)
    }
}

impl std::error::Error for AwsError {}

impl AwsError {
    /// Its class: AWS's permission and throttling codes, else its HTTP status.
    pub fn kind(&self) -> ErrorKind {
        match self.code.as_str() {
            "AccessDeniedException"
            | "AccessDenied"
            | "UnrecognizedClientException"
            | "InvalidSignatureException"
            | "ExpiredTokenException" => ErrorKind::PermissionDenied,
            "ThrottlingException" | "ServiceUnavailable" => ErrorKind::Unavailable,
            "ResourceInUse" => ErrorKind::AlreadyExists,
            // A bad request (400) is the backend refusing what was sent, not a missing thing.
            _ if self.status == 404 => ErrorKind::NotFound,
            _ => match ErrorKind::from_http_status(self.status) {
                ErrorKind::NotFound => ErrorKind::Backend,
                kind => kind,
            },
        }
    }
}

/// A connected SageMaker API.
pub struct SageMaker {
    http: reqwest::Client,
    endpoint: String,
    region: String,
    credentials: aws_credential_types::provider::SharedCredentialsProvider,
}

const ATTEMPTS: u32 = 4;

impl SageMaker {
    /// Loads the configuration (no request is made).
    pub async fn connect(scheduler: &str) -> Result<SageMaker> {
        let (conf, region) = crate::schedulers::aws::load_config(scheduler).await?;
        let credentials = conf
            .credentials_provider()
            .ok_or_else(|| Error::backend(scheduler, "no AWS credentials provider configured"))?;
        let endpoint = std::env::var("AWS_ENDPOINT_URL_SAGEMAKER")
            .ok()
            .or_else(|| conf.endpoint_url().map(str::to_string))
            .unwrap_or_else(|| format!("https://api.sagemaker.{region}.amazonaws.com"));
        Ok(SageMaker {
            http: reqwest::Client::new(),
            endpoint: endpoint.trim_end_matches('/').to_string(),
            region,
            credentials,
        })
    }

    /// The region requests go to.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// Calls `SageMaker.{operation}` with `body`; a service error comes back as `Err(Ok(..))`.
    pub async fn call(
        &self,
        operation: &str,
        body: &Value,
    ) -> Result<std::result::Result<Value, AwsError>> {
        let creds = self
            .credentials
            .provide_credentials()
            .await
            .map_err(|e| Error::backend(super::NAME, format!("no AWS credentials: {e}")))?;
        let identity = creds.into();
        let body = serde_json::to_vec(body).unwrap_or_default();
        let url = format!("{}/", self.endpoint);
        let target = format!("SageMaker.{operation}");
        let mut delay = Duration::from_millis(200);
        for attempt in 1..=ATTEMPTS {
            let headers = [
                ("content-type", "application/x-amz-json-1.1"),
                ("x-amz-target", target.as_str()),
            ];
            let params = v4::SigningParams::builder()
                .identity(&identity)
                .region(&self.region)
                .name("sagemaker")
                .time(SystemTime::now())
                .settings(SigningSettings::default())
                .build()
                .map_err(|e| Error::backend(super::NAME, format!("signing: {e}")))?
                .into();
            let signable = SignableRequest::new(
                "POST",
                url.clone(),
                headers.into_iter(),
                SignableBody::Bytes(&body),
            )
            .map_err(|e| Error::backend(super::NAME, format!("signing: {e}")))?;
            let (instructions, _) = sign(signable, &params)
                .map_err(|e| Error::backend(super::NAME, format!("signing: {e}")))?
                .into_parts();
            let mut req = self.http.post(&url).body(body.clone());
            for (k, v) in headers.iter().copied().chain(instructions.headers()) {
                req = req.header(k, v);
            }
            let outcome = match req.send().await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let text = resp.text().await.unwrap_or_default();
                    if (200..300).contains(&status) {
                        return Ok(Ok(if text.is_empty() {
                            Value::Null
                        } else {
                            serde_json::from_str(&text).unwrap_or(Value::Null)
                        }));
                    }
                    let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                    let code = v["__type"]
                        .as_str()
                        .or(v["code"].as_str())
                        .map(|t| t.rsplit('#').next().unwrap_or(t).to_string())
                        .unwrap_or_else(|| format!("HTTP{status}"));
                    let message = v["message"]
                        .as_str()
                        .or(v["Message"].as_str())
                        .map(str::to_string)
                        .unwrap_or_else(|| text.chars().take(200).collect());
                    let retryable = status >= 500 || code.contains("Throttl") || status == 429;
                    let err = AwsError {
                        code,
                        message,
                        status,
                    };
                    if !retryable || attempt == ATTEMPTS {
                        return Ok(Err(err));
                    }
                    format!("{} {}", err.code, err.message)
                }
                Err(e) if attempt == ATTEMPTS => {
                    return Err(Error::backend_caused_by(
                        super::NAME,
                        format!("{operation}: cannot reach {}: {e}", self.endpoint),
                        ErrorKind::Unavailable,
                        e,
                    ))
                }
                Err(e) => e.to_string(),
            };
            log::debug!("{operation} attempt {attempt} failed ({outcome}); retrying");
            tokio::time::sleep(delay).await;
            delay *= 2;
        }
        // The last attempt returns above.
        Err(Error::backend(
            super::NAME,
            format!("{operation}: retries exhausted"),
        ))
    }
}

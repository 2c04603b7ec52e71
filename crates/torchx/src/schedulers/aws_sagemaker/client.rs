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
pub(crate) struct AwsError {
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
    /// Its class: AWS's permission and throttling codes, SageMaker's name in use, else its
    /// HTTP status.
    pub(crate) fn kind(&self) -> ErrorKind {
        if let Some(kind) = crate::schedulers::aws::kind_of_code(&self.code) {
            return kind;
        }
        match self.code.as_str() {
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

/// A request that could not be signed (keeps the signer's error as the cause).
fn signing(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::backend(super::NAME, format!("signing: {e}")).with_source(e)
}

/// The answer of a call that succeeded: its JSON, `null` when empty. A body that cannot be read
/// or is not JSON is an error, never a success with nothing in it (a created job whose name
/// and state would be lost).
fn success_body(operation: &str, text: reqwest::Result<String>) -> Result<Value> {
    let text = text.map_err(|e| {
        Error::backend_caused_by(
            super::NAME,
            format!("{operation}: its answer could not be read"),
            ErrorKind::Unavailable,
            e,
        )
    })?;
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_str(&text).map_err(|e| {
        Error::backend_caused_by(
            super::NAME,
            format!(
                "{operation}: its answer is not JSON: {:?}",
                text.chars().take(200).collect::<String>()
            ),
            ErrorKind::Backend,
            e,
        )
    })
}

/// A connected SageMaker API.
#[derive(Clone)]
pub(crate) struct SageMaker {
    http: reqwest::Client,
    endpoint: String,
    region: String,
    credentials: aws_credential_types::provider::SharedCredentialsProvider,
    /// CloudWatch Logs, where the training jobs' containers write.
    logs: aws_sdk_cloudwatchlogs::Client,
}

const ATTEMPTS: u32 = 4;

impl SageMaker {
    /// Loads the configuration (no request is made).
    pub(crate) async fn connect(scheduler: &str) -> Result<SageMaker> {
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
            logs: aws_sdk_cloudwatchlogs::Client::new(&conf),
        })
    }

    /// The CloudWatch Logs client of the same configuration.
    pub(crate) fn logs(&self) -> &aws_sdk_cloudwatchlogs::Client {
        &self.logs
    }

    /// The region requests go to.
    pub(crate) fn region(&self) -> &str {
        &self.region
    }

    /// Calls `SageMaker.{operation}` with `body`; a service error comes back as `Err(Ok(..))`.
    pub(crate) async fn call(
        &self,
        operation: &str,
        body: &Value,
    ) -> Result<std::result::Result<Value, AwsError>> {
        let creds = self.credentials.provide_credentials().await.map_err(|e| {
            Error::backend(super::NAME, format!("no AWS credentials: {e}")).with_source(e)
        })?;
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
                .map_err(signing)?
                .into();
            let signable = SignableRequest::new(
                "POST",
                url.clone(),
                headers.into_iter(),
                SignableBody::Bytes(&body),
            )
            .map_err(signing)?;
            let (instructions, _) = sign(signable, &params).map_err(signing)?.into_parts();
            let mut req = self.http.post(&url).body(body.clone());
            for (k, v) in headers.iter().copied().chain(instructions.headers()) {
                req = req.header(k, v);
            }
            let outcome = match req.send().await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    if (200..300).contains(&status) {
                        return success_body(operation, resp.text().await).map(Ok);
                    }
                    let text = resp.text().await.unwrap_or_default();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2xx answer that is not JSON, or that breaks off, is an error with its cause, not a
    /// success with an empty answer.
    #[test]
    fn an_unreadable_success_is_an_error() {
        assert_eq!(success_body("X", Ok(String::new())).unwrap(), Value::Null);
        let v = success_body("X", Ok("{\"a\": 1}".into())).unwrap();
        assert_eq!(v["a"], 1);
        let e = success_body("CreateTrainingJob", Ok("<html>proxy</html>".into())).unwrap_err();
        assert!(
            e.to_string()
                .contains("CreateTrainingJob: its answer is not JSON"),
            "{e}"
        );
        assert!(std::error::Error::source(&e).is_some(), "the cause is kept");
        // A body cut off mid-way: a server that promises more bytes than it sends.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let text = rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}/", listener.local_addr().unwrap());
            tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                let (mut sock, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 4096];
                let _ = tokio::io::AsyncReadExt::read(&mut sock, &mut buf).await;
                let _ = sock
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{\"Train")
                    .await;
            });
            let resp = reqwest::Client::new().post(&url).send().await.unwrap();
            resp.text().await
        });
        let e = success_body("DescribeTrainingJob", text).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
        assert!(std::error::Error::source(&e).is_some());
    }
}

use crate::run_opts;

run_opts! {
    /// Run options of the `aws_batch` scheduler (TorchX's).
    pub(crate) struct AwsBatchOpts {
        /// queue to schedule job in
        queue: String,
        /// The username to tag the job with. `getpass.getuser()` if not specified.
        user: Option<String>,
        /// If true runs the container with elevated permissions. Equivalent to running with `docker run --privileged`.
        privileged: bool = false,
        /// The share identifier for the job. This must be set if and only if the job queue has a scheduling policy.
        share_id: Option<String>,
        /// The scheduling priority for the job within the context of share_id. Higher number (between 0 and 9999) means higher priority. This will only take effect if the job queue has a scheduling policy.
        priority: i64 = 0,
        /// The Amazon Resource Name (ARN) of the IAM role that the container can assume for AWS permissions.
        job_role_arn: Option<String>,
        /// The Amazon Resource Name (ARN) of the IAM role that the ECS agent can assume for AWS permissions.
        execution_role_arn: Option<String>,
        /// (remote jobs) the image repository to use when pushing patched images, must have push access. Ex: example.com/your/container
        image_repo: Option<String>,
        /// whether to suppress verbose output for image building. Defaults to ``False``.
        quiet: bool = false,
    }
}

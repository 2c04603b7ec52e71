use std::collections::BTreeMap;

use crate::run_opts;

run_opts! {
    /// Run options of the `aws_sagemaker` scheduler (TorchX's names).
    pub(crate) struct AwsSageMakerOpts {
        /// an AWS IAM role (either name or full ARN). The Amazon SageMaker training jobs and APIs that create Amazon SageMaker endpoints use this role to access training data and model artifacts.
        role: String,
        /// type of EC2 instance to use for training, for example, 'ml.c4.xlarge'
        instance_type: String,
        /// number of Amazon EC2 instances to use for training (default: the role's num_replicas)
        instance_count: Option<i64>,
        /// the username to tag the job with. `getpass.getuser()` if not specified.
        user: Option<String>,
        /// the duration of time in seconds to retain configured resources in a warm pool for subsequent training jobs.
        keep_alive_period_in_seconds: Option<i64>,
        /// size in GB of the storage volume to use for storing input and output data during training (default: 30).
        volume_size: Option<i64>,
        /// KMS key ID for encrypting EBS volume attached to the training instance.
        volume_kms_key: Option<String>,
        /// timeout in seconds for training (default: 24 * 60 * 60).
        max_run: Option<i64>,
        /// the input mode that the algorithm supports (default: 'File').
        input_mode: Option<String>,
        /// S3 location for saving the training result (model artifacts and output files), e.g. s3://bucket/prefix (required by SageMaker)
        output_path: Option<String>,
        /// KMS key ID for encrypting the training output.
        output_kms_key: Option<String>,
        /// prefix for training job name when the fit() method launches. If not specified, the app name is used.
        base_job_name: Option<String>,
        /// tags for the training job, `Key:Value,...` (the AppDef's metadata is added)
        tags: Option<BTreeMap<String, String>>,
        /// list of subnet ids. If not specified training job will be created without VPC config.
        subnets: Option<Vec<String>>,
        /// list of security group ids. If not specified training job will be created without VPC config.
        security_group_ids: Option<Vec<String>>,
        /// S3 URI of a model to be used as the `model` input channel
        model_uri: Option<String>,
        /// name of the channel where model_uri will be downloaded (default: 'model').
        model_channel_name: Option<String>,
        /// metrics to capture from the logs, `Name:Regex,...`
        metric_definitions: Option<BTreeMap<String, String>>,
        /// specifies whether traffic between training containers is encrypted for the training job (default: False).
        encrypt_inter_container_traffic: Option<bool>,
        /// specifies whether to use SageMaker Managed Spot instances for training. If enabled then the max_wait arg should also be set.
        use_spot_instances: Option<bool>,
        /// timeout in seconds waiting for spot training job.
        max_wait: Option<i64>,
        /// S3 URI in which to persist checkpoints that the algorithm persists (if any) during training.
        checkpoint_s3_uri: Option<String>,
        /// local path that the algorithm writes its checkpoints to.
        checkpoint_local_path: Option<String>,
        /// configuration for how debugging information is emitted with SageMaker Debugger (True: to output_path)
        debugger_hook_config: Option<bool>,
        /// enable SageMaker Metrics Time Series.
        enable_sagemaker_metrics: Option<bool>,
        /// specifies whether container will run in network isolation mode (default: False).
        enable_network_isolation: Option<bool>,
        /// specifies whether Debugger monitoring and profiling will be disabled (default: False).
        disable_profiler: Option<bool>,
        /// environment variables to be set for use during training job
        environment: Option<BTreeMap<String, String>>,
        /// number of times to move a job to the STARTING status. You can specify between 1 and 30 attempts.
        max_retry_attempts: Option<i64>,
        /// source directory to upload with the job (needs an upload to S3: not supported, bake the code into the image)
        source_dir: Option<String>,
        /// git configuration used for cloning files (not supported, bake the code into the image)
        git_config: Option<BTreeMap<String, String>>,
        /// hyperparameters, `Key:Value,...`
        hyperparameters: Option<BTreeMap<String, String>>,
        /// log level to use within the container (sagemaker_container_log_level hyperparameter).
        container_log_level: Option<i64>,
        /// S3 location where custom code will be uploaded (not supported, bake the code into the image)
        code_location: Option<String>,
        /// local paths of extra dependencies to upload (not supported, bake them into the image)
        dependencies: Option<Vec<String>>,
        /// specifies how SageMaker accesses the Docker image that contains the training algorithm: `Platform` or `Vpc`.
        training_repository_access_mode: Option<String>,
        /// Amazon Resource Name (ARN) of an AWS Lambda function that provides credentials to authenticate to the private Docker registry where your training image is hosted.
        training_repository_credentials_provider_arn: Option<String>,
        /// when set to true, Model is uploaded to Amazon S3 without compression after training finishes.
        disable_output_compression: Option<bool>,
        /// specifies whether it is running Sagemaker built-in infra check jobs.
        enable_infra_check: Option<bool>,
        /// (remote jobs) the image repository to use when pushing patched images, must have push access. Ex: example.com/your/container
        image_repo: Option<String>,
        /// whether to suppress verbose output for image building. Defaults to ``False``.
        quiet: bool = false,
    }
}

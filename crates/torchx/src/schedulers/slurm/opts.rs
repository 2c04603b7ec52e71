use crate::run_opts;

run_opts! {
    /// Run options of the `slurm` scheduler.
    pub struct SlurmOpts {
        /// The partition to run the job in.
        partition: Option<String>,
        /// The maximum time the job is allowed to run for. Formats: "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours", "days-hours:minutes" or "days-hours:minutes:seconds"
        time: Option<String>,
        /// Comment to set on the slurm job.
        comment: Option<String>,
        /// Constraint to use for the slurm job.
        constraint: Option<String>,
        /// User to mail on job end.
        #[key = "mail-user"]
        mail_user: Option<String>,
        /// What events to mail users on.
        #[key = "mail-type"]
        mail_type: Option<String>,
        /// The directory to place the job code and outputs. The directory must not exist and will be created. To enable log iteration, jobs will be tracked in ``.torchxslurmjobdirs``.
        job_dir: Option<String>,
        /// Quality of Service (QoS) to assign to the job.
        qos: Option<String>,
        /// The account to charge the job to.
        account: Option<String>,
        /// Allocate whole nodes to each replica (no sharing with other jobs).
        exclusive: bool = false,
        /// The workspace builder: `dir` (the default: the workspace is copied into job_dir) or `docker` (it is built into an image pushed to image_repo, and every replica runs in that image through the cluster's container plugin, `srun --container-image`: pyxis).
        workspace_type: Option<String>,
        /// The image repository (`REGISTRY/REPOSITORY`) a `docker` workspace is pushed to.
        image_repo: Option<String>,
        /// The Slurm version to render for (e.g. 24.11), instead of asking `sinfo --version`; lets a dry run work without a cluster.
        slurm_version: Option<String>,
    }
}

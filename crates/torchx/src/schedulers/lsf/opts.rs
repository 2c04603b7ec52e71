use crate::run_opts;

run_opts! {
    /// Run options of the `lsf` scheduler (TorchX's).
    pub(crate) struct LsfOpts {
        /// queue name to submit jobs
        lsf_queue: Option<String>,
        /// The directory to place the job code and outputs. The directory must not exist and will be created.
        jobdir: Option<String>,
        /// working directory in container jobs
        container_workdir: Option<String>,
        /// True if using the host network for jobs
        host_network: bool = false,
        /// size of shared memory (/dev/shm) for jobs
        shm_size: String = "64m".into(),
    }
}

use crate::run_opts;

run_opts! {
    /// Run options of the `local_cwd` scheduler.
    pub struct LocalCwdOpts {
        /// dir to write stdout/stderr log files of replicas
        log_dir: Option<String>,
        /// if set, prepends CWD to replica's PATH env var making any binaries in CWD take precedence over those in PATH
        prepend_cwd: bool = false,
        /// sets the `CUDA_AVAILABLE_DEVICES` for roles that request GPU resources. Each role replica will be assigned one GPU. Does nothing if the device count is less than replicas.
        auto_set_cuda_visible_devices: bool = false,
    }
}

use std::collections::BTreeMap;

use crate::run_opts;

run_opts! {
    /// Run options of the `local_docker` scheduler.
    pub struct LocalDockerOpts {
        /// list of glob patterns of environment variables to copy if not set in AppDef. Ex: FOO_*
        copy_env: Option<Vec<String>>,
        /// environment variables to be passed to the run. The separator sign can be eiher comma or semicolon (e.g. ENV1:v1,ENV2:v2,ENV3:v3 or ENV1:V1;ENV2:V2). Environment variables from env will be applied on top of the ones from copy_env
        env: Option<BTreeMap<String, String>>,
        /// If true runs the container with elevated permissions. Equivalent to running with `docker run --privileged`.
        privileged: bool = false,
        /// (remote jobs) the image repository to use when pushing patched images, must have push access. Ex: example.com/your/container
        image_repo: Option<String>,
        /// whether to suppress verbose output for image building. Defaults to ``False``.
        quiet: bool = false,
    }
}

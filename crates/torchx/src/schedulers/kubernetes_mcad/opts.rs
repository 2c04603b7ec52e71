use crate::run_opts;

run_opts! {
    /// Run options of the `kubernetes_mcad` scheduler (TorchX's; it has no `quiet`).
    pub(crate) struct KubernetesMcadOpts {
        /// Kubernetes namespace to schedule job in
        namespace: String = "default".into(),
        /// The image repository to use when pushing patched images, must have push access. Ex: example.com/your/container
        image_repo: Option<String>,
        /// The service account name to set on the pod specs
        service_account: Option<String>,
        /// The priority level to set on the job specs. Higher integer value means higher priority
        priority: Option<i64>,
        /// Pod specific priority level. Check with your Kubernetes cluster admin if Priority classes are defined on your system
        priority_class_name: Option<String>,
        /// The name of the Kubernetes/OpenShift secret set up for private images
        image_secret: Option<String>,
        /// Option to run TorchX-MCAD with a co-scheduler. User must provide the co-scheduler name.
        coscheduler_name: Option<String>,
        /// Name of additional pod-to-pod network beyond default Kubernetes network
        network: Option<String>,
    }
}

//! [`Resource`] and TorchX's named resources (`gpu.small`, `aws_p4d.24xlarge`, ...).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// 1 GiB in MB.
pub const GIB: i64 = 1024;
/// AWS instances lose ~4% of memory to the system: TorchX's `int(1024 * 0.96)`.
const AWS_GIB: i64 = 983;
/// The capability key holding an instance type.
pub(super) const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// The EFA device name.
pub(super) const EFA_DEVICE: &str = "vpc.amazonaws.com/efa";
/// The AWS Neuron device name.
pub(super) const NEURON_DEVICE: &str = "aws.amazon.com/neurondevice";

/// Resources of one replica. `-1` means "not specified".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resource {
    /// Logical CPUs.
    pub cpu: i64,
    /// GPUs.
    pub gpu: i64,
    /// Memory in MB.
    #[serde(rename = "memMB")]
    pub mem_mb: i64,
    /// Scheduler-specific capabilities (e.g. the instance type).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capabilities: BTreeMap<String, serde_json::Value>,
    /// Named devices and their counts (e.g. EFA).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub devices: BTreeMap<String, i64>,
}

impl Resource {
    /// A resource with the given cpu, gpu and memory (MB).
    pub fn new(cpu: i64, gpu: i64, mem_mb: i64) -> Resource {
        Resource {
            cpu,
            gpu,
            mem_mb,
            capabilities: BTreeMap::new(),
            devices: BTreeMap::new(),
        }
    }

    /// TorchX's `NULL_RESOURCE`: nothing specified.
    pub fn null() -> Resource {
        Resource::new(-1, -1, -1)
    }

    /// True for [`Resource::null`].
    pub fn is_null(&self) -> bool {
        *self == Resource::null()
    }

    /// Either unset (cpu, gpu and memMB all -1, as [`Resource::null`]) or none of them negative:
    /// a negative count would be rounded, dropped or sent on by schedulers, never meant.
    pub fn check(&self) -> std::result::Result<(), String> {
        if (self.cpu, self.gpu, self.mem_mb) == (-1, -1, -1) {
            return Ok(());
        }
        for (key, value) in [("cpu", self.cpu), ("gpu", self.gpu), ("memMB", self.mem_mb)] {
            if value < 0 {
                return Err(format!(
                    "resource {key} = {value} is negative; give 0 or more (or leave the whole \
                     resource unset)"
                ));
            }
        }
        Ok(())
    }

    /// The instance type capability, if set.
    pub fn instance_type(&self) -> Option<&str> {
        self.capabilities
            .get(INSTANCE_TYPE)
            .and_then(|v| v.as_str())
    }

    fn aws(cpu: i64, gpu: i64, gib: i64, itype: &str, devices: &[(&str, i64)]) -> Resource {
        let mut r = Resource::new(cpu, gpu, gib * AWS_GIB);
        r.capabilities.insert(
            INSTANCE_TYPE.into(),
            serde_json::Value::String(itype.into()),
        );
        r.devices = devices.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        r
    }
}

const EFA1: &[(&str, i64)] = &[(EFA_DEVICE, 1)];

/// (name, cpu, gpu, GiB or MB, instance type, devices); generic entries have no instance type and
/// give MB directly.
type Entry = (
    &'static str,
    i64,
    i64,
    i64,
    &'static str,
    &'static [(&'static str, i64)],
);

const GENERIC: &[Entry] = &[
    ("gpu.small", 8, 1, 32 * GIB, "", &[]),
    ("gpu.medium", 16, 2, 64 * GIB, "", &[]),
    ("gpu.large", 32, 4, 128 * GIB, "", &[]),
    ("gpu.xlarge", 64, 8, 256 * GIB, "", &[]),
    ("cpu.nano", 1, 0, 512, "", &[]),
    ("cpu.micro", 1, 0, GIB, "", &[]),
    ("cpu.small", 1, 0, 2 * GIB, "", &[]),
    ("cpu.medium", 2, 0, 4 * GIB, "", &[]),
    ("cpu.large", 2, 0, 8 * GIB, "", &[]),
    ("cpu.xlarge", 8, 0, 32 * GIB, "", &[]),
];

const AWS: &[Entry] = &[
    ("aws_t3.medium", 2, 0, 4, "t3.medium", &[]),
    ("aws_m5.large", 2, 0, 8, "m5.large", &[]),
    ("aws_m5.xlarge", 4, 0, 16, "m5.xlarge", &[]),
    ("aws_m5.2xlarge", 8, 0, 32, "m5.2xlarge", &[]),
    ("aws_m5.4xlarge", 16, 0, 64, "m5.4xlarge", &[]),
    ("aws_m5.8xlarge", 32, 0, 128, "m5.8xlarge", &[]),
    ("aws_m5.12xlarge", 48, 0, 192, "m5.12xlarge", &[]),
    ("aws_m5.16xlarge", 64, 0, 256, "m5.16xlarge", &[]),
    ("aws_m5.24xlarge", 96, 0, 384, "m5.24xlarge", &[]),
    ("aws_m5.metal", 96, 0, 384, "m5.metal", &[]),
    ("aws_m5d.large", 2, 0, 8, "m5d.large", &[]),
    ("aws_m5d.xlarge", 4, 0, 16, "m5d.xlarge", &[]),
    ("aws_m5d.2xlarge", 8, 0, 32, "m5d.2xlarge", &[]),
    ("aws_m5d.4xlarge", 16, 0, 64, "m5d.4xlarge", &[]),
    ("aws_m5d.8xlarge", 32, 0, 128, "m5d.8xlarge", &[]),
    ("aws_m5d.12xlarge", 48, 0, 192, "m5d.12xlarge", &[]),
    ("aws_m5d.16xlarge", 64, 0, 256, "m5d.16xlarge", &[]),
    ("aws_m5d.24xlarge", 96, 0, 384, "m5d.24xlarge", &[]),
    ("aws_m5d.metal", 96, 0, 384, "m5d.metal", &[]),
    ("aws_c5.18xlarge", 72, 0, 142, "c5.18xlarge", &[]),
    ("aws_p3.2xlarge", 8, 1, 61, "p3.2xlarge", &[]),
    ("aws_p3.8xlarge", 32, 4, 244, "p3.8xlarge", &[]),
    ("aws_p3.16xlarge", 64, 8, 488, "p3.16xlarge", &[]),
    ("aws_p3dn.24xlarge", 96, 8, 768, "p3dn.24xlarge", EFA1),
    (
        "aws_p4d.24xlarge",
        96,
        8,
        1152,
        "p4d.24xlarge",
        &[(EFA_DEVICE, 4)],
    ),
    (
        "aws_p4de.24xlarge",
        96,
        8,
        1152,
        "p4de.24xlarge",
        &[(EFA_DEVICE, 4)],
    ),
    (
        "aws_p5.48xlarge",
        192,
        8,
        2048,
        "p5.48xlarge",
        &[(EFA_DEVICE, 32)],
    ),
    (
        "aws_p5e.48xlarge",
        192,
        8,
        2048,
        "p5e.48xlarge",
        &[(EFA_DEVICE, 32)],
    ),
    (
        "aws_p5en.48xlarge",
        192,
        8,
        2048,
        "p5en.48xlarge",
        &[(EFA_DEVICE, 16)],
    ),
    (
        "aws_p6-b200.48xlarge",
        192,
        8,
        2048,
        "p6-b200.48xlarge",
        &[(EFA_DEVICE, 8)],
    ),
    (
        "aws_p6-b300.48xlarge",
        192,
        8,
        4096,
        "p6-b300.48xlarge",
        &[(EFA_DEVICE, 16)],
    ),
    (
        "aws_p6e-gb200.36xlarge",
        144,
        4,
        960,
        "p6e-gb200.36xlarge",
        &[(EFA_DEVICE, 16)],
    ),
    ("aws_g4dn.xlarge", 4, 1, 16, "g4dn.xlarge", &[]),
    ("aws_g4dn.2xlarge", 8, 1, 32, "g4dn.2xlarge", &[]),
    ("aws_g4dn.4xlarge", 16, 1, 64, "g4dn.4xlarge", &[]),
    ("aws_g4dn.8xlarge", 32, 1, 128, "g4dn.8xlarge", EFA1),
    ("aws_g4dn.16xlarge", 64, 1, 256, "g4dn.16xlarge", EFA1),
    ("aws_g4dn.12xlarge", 48, 4, 192, "g4dn.12xlarge", EFA1),
    ("aws_g4dn.metal", 96, 8, 384, "g4dn.metal", EFA1),
    ("aws_g5.xlarge", 4, 1, 16, "g5.xlarge", &[]),
    ("aws_g5.2xlarge", 8, 1, 32, "g5.2xlarge", &[]),
    ("aws_g5.4xlarge", 16, 1, 64, "g5.4xlarge", &[]),
    ("aws_g5.8xlarge", 32, 1, 128, "g5.8xlarge", EFA1),
    ("aws_g5.16xlarge", 64, 1, 256, "g5.16xlarge", EFA1),
    ("aws_g5.12xlarge", 48, 4, 192, "g5.12xlarge", EFA1),
    ("aws_g5.24xlarge", 96, 4, 384, "g5.24xlarge", EFA1),
    ("aws_g5.48xlarge", 192, 8, 768, "g5.48xlarge", EFA1),
    ("aws_g6e.xlarge", 4, 1, 32, "g6e.xlarge", &[]),
    ("aws_g6e.2xlarge", 8, 1, 64, "g6e.2xlarge", &[]),
    ("aws_g6e.4xlarge", 16, 1, 128, "g6e.4xlarge", &[]),
    ("aws_g6e.8xlarge", 32, 1, 256, "g6e.8xlarge", &[]),
    ("aws_g6e.16xlarge", 64, 1, 512, "g6e.16xlarge", &[]),
    ("aws_g6e.12xlarge", 48, 4, 384, "g6e.12xlarge", &[]),
    (
        "aws_g6e.24xlarge",
        96,
        4,
        768,
        "g6e.24xlarge",
        &[(EFA_DEVICE, 2)],
    ),
    (
        "aws_g6e.48xlarge",
        192,
        8,
        1536,
        "g6e.48xlarge",
        &[(EFA_DEVICE, 4)],
    ),
    (
        "aws_trn1.2xlarge",
        8,
        0,
        32,
        "trn1.2xlarge",
        &[(NEURON_DEVICE, 1)],
    ),
    (
        "aws_trn1.32xlarge",
        128,
        0,
        512,
        "trn1.32xlarge",
        &[(EFA_DEVICE, 8), (NEURON_DEVICE, 16)],
    ),
    (
        "aws_inf2.xlarge",
        4,
        0,
        16,
        "inf2.xlarge",
        &[(NEURON_DEVICE, 1)],
    ),
    (
        "aws_inf2.8xlarge",
        32,
        0,
        128,
        "inf2.8xlarge",
        &[(NEURON_DEVICE, 1)],
    ),
    (
        "aws_inf2.24xlarge",
        96,
        0,
        384,
        "inf2.24xlarge",
        &[(NEURON_DEVICE, 6)],
    ),
    (
        "aws_inf2.48xlarge",
        192,
        0,
        768,
        "inf2.48xlarge",
        &[(NEURON_DEVICE, 12)],
    ),
];

/// Every builtin named resource name, generic first, then AWS, then `NULL`/`MISSING`.
pub fn named_resource_names() -> impl Iterator<Item = &'static str> {
    GENERIC
        .iter()
        .chain(AWS)
        .map(|e| e.0)
        .chain(["NULL", "MISSING"])
}

/// Looks up a builtin named resource (a fresh value each call); as TorchX's nightly, a name
/// that matches none exactly matches the one that it spells ignoring case.
pub fn named_resource(name: &str) -> Result<Resource> {
    exact_named_resource(name).or_else(|e| {
        match named_resource_names()
            .find(|n| n.eq_ignore_ascii_case(name))
            .map(exact_named_resource)
        {
            Some(found) => found,
            None => Err(e),
        }
    })
}

fn exact_named_resource(name: &str) -> Result<Resource> {
    if name == "NULL" || name == "MISSING" {
        return Ok(Resource::null());
    }
    if let Some(&(_, cpu, gpu, mem, _, _)) = GENERIC.iter().find(|e| e.0 == name) {
        return Ok(Resource::new(cpu, gpu, mem));
    }
    if let Some(&(_, cpu, gpu, gib, itype, devices)) = AWS.iter().find(|e| e.0 == name) {
        return Ok(Resource::aws(cpu, gpu, gib, itype, devices));
    }
    Err(Error::not_found(
        "named resource",
        name,
        format!(
            ". Run `torchx runopts` docs or see the named resources list: {}",
            named_resource_names().collect::<Vec<_>>().join(", ")
        ),
    )
    .suggesting(name, named_resource_names()))
}

/// TorchX's `resource(cpu, gpu, memMB, h)`: `h` (a named resource) wins; otherwise unset or zero
/// values fall back to cpu=2, gpu=0, memMB=1024 (TorchX uses `or`, so 0 cpu becomes 2).
pub fn resource(
    cpu: Option<i64>,
    gpu: Option<i64>,
    mem_mb: Option<i64>,
    h: Option<&str>,
) -> Result<Resource> {
    if let Some(h) = h {
        return named_resource(h);
    }
    let or = |v: Option<i64>, d: i64| v.filter(|v| *v != 0).unwrap_or(d);
    Ok(Resource::new(or(cpu, 2), or(gpu, 0), or(mem_mb, 1024)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_matches_ignoring_case_where_nothing_matches_exactly() {
        assert_eq!(
            named_resource("AWS_T3.Medium").unwrap(),
            named_resource("aws_t3.medium").unwrap()
        );
        assert_eq!(
            named_resource("Gpu.Small").unwrap(),
            Resource::new(8, 1, 32768)
        );
        assert!(named_resource("gpu.smal").is_err());
    }

    #[test]
    fn values_match_torchx() {
        let r = named_resource("aws_p4d.24xlarge").unwrap();
        assert_eq!((r.cpu, r.gpu, r.mem_mb), (96, 8, 1132416));
        assert_eq!(r.instance_type(), Some("p4d.24xlarge"));
        assert_eq!(r.devices[EFA_DEVICE], 4);
        let r = named_resource("aws_t3.medium").unwrap();
        assert_eq!((r.cpu, r.gpu, r.mem_mb), (2, 0, 3932));
        assert_eq!(named_resource("aws_c5.18xlarge").unwrap().mem_mb, 139586);
        assert_eq!(named_resource("aws_p5.48xlarge").unwrap().mem_mb, 2013184);
        assert_eq!(named_resource("aws_g6e.48xlarge").unwrap().mem_mb, 1509888);
        let r = named_resource("aws_trn1.32xlarge").unwrap();
        assert_eq!((r.devices[EFA_DEVICE], r.devices[NEURON_DEVICE]), (8, 16));
        assert_eq!(
            named_resource("gpu.small").unwrap(),
            Resource::new(8, 1, 32768)
        );
        assert_eq!(
            named_resource("cpu.nano").unwrap(),
            Resource::new(1, 0, 512)
        );
        assert_eq!(named_resource("NULL").unwrap(), Resource::null());
        // TorchX 0.8's table: 61 AWS instance types (0.7.0 had 40).
        assert_eq!(named_resource_names().count(), 10 + 61 + 2);
        let r = named_resource("aws_p6-b300.48xlarge").unwrap();
        assert_eq!(
            (r.gpu, r.mem_mb, r.devices[EFA_DEVICE]),
            (8, 4096 * 983, 16)
        );
    }

    #[test]
    fn full_table_snapshot() {
        let table: Vec<String> = named_resource_names()
            .map(|n| {
                let r = named_resource(n).unwrap();
                format!(
                    "{n} {} {} {} {:?} {:?}",
                    r.cpu,
                    r.gpu,
                    r.mem_mb,
                    r.instance_type(),
                    r.devices
                )
            })
            .collect();
        insta::assert_snapshot!(table.join("\n"));
    }

    #[test]
    fn unknown_suggests() {
        let err = named_resource("gpu.smal").unwrap_err();
        assert_eq!(err.suggestion(), Some("gpu.small"));
        let e = err.to_string();
        assert!(
            e.starts_with("named resource `gpu.smal` not found. Run"),
            "{e}"
        );
    }

    #[test]
    fn resource_helper() {
        assert_eq!(
            resource(None, None, None, None).unwrap(),
            Resource::new(2, 0, 1024)
        );
        assert_eq!(
            resource(Some(0), Some(1), None, None).unwrap(),
            Resource::new(2, 1, 1024)
        );
        assert_eq!(
            resource(Some(4), None, None, Some("gpu.small")).unwrap(),
            Resource::new(8, 1, 32768)
        );
    }
}

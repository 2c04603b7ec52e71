//! Mounts and TorchX's `type=bind,src=..,dst=..,readonly` grammar.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A filesystem or device mount of a role's replicas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum Mount {
    /// A host path bind-mounted into the replica.
    Bind {
        /// Host path.
        src_path: String,
        /// Path inside the replica.
        dst_path: String,
        /// Mount read-only.
        #[serde(default)]
        read_only: bool,
    },
    /// A named volume (or PVC on Kubernetes).
    Volume {
        /// Volume name or id.
        src: String,
        /// Path inside the replica.
        dst_path: String,
        /// Mount read-only.
        #[serde(default)]
        read_only: bool,
    },
    /// A host device.
    Device {
        /// Host device path.
        src_path: String,
        /// Path inside the replica.
        dst_path: String,
        /// Permissions, a subset of `rwm`.
        #[serde(default = "default_perm")]
        permissions: String,
    },
}

fn default_perm() -> String {
    "rwm".into()
}

const KEYS: &[(&str, &str)] = &[
    ("type", "type"),
    ("destination", "dst"),
    ("dst", "dst"),
    ("target", "dst"),
    ("read_only", "readonly"),
    ("readonly", "readonly"),
    ("source", "src"),
    ("src", "src"),
    ("perm", "perm"),
];

/// Why mount options were refused: a problem with the option keys (unknown key, `type` not
/// first, a required key missing) or with a value. TorchX raises `KeyError` for the first and
/// `ValueError` for the second; the Python front keeps that distinction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountError {
    /// An unknown, misplaced or missing option key.
    Key(String),
    /// A bad value (mount type, device permissions).
    Value(String),
}

impl From<MountError> for Error {
    fn from(e: MountError) -> Self {
        match e {
            MountError::Key(msg) | MountError::Value(msg) => Error::arg(msg),
        }
    }
}

/// Parses mount options. `opts` is a flat list of `key[=value]` tokens (the CLI splits
/// `type=bind,src=a,dst=b,readonly` on commas); each `type=` starts a new mount. A leading `~` in a
/// bind source is replaced by `home` when given.
pub fn parse_mounts<S: AsRef<str>>(opts: &[S], home: Option<&str>) -> Result<Vec<Mount>> {
    Ok(parse_mounts_detailed(opts, home)?)
}

/// [`parse_mounts`], telling key problems from value problems.
pub fn parse_mounts_detailed<S: AsRef<str>>(
    opts: &[S],
    home: Option<&str>,
) -> std::result::Result<Vec<Mount>, MountError> {
    let mut groups: Vec<Vec<(&'static str, String)>> = Vec::new();
    for opt in opts {
        let opt = opt.as_ref().trim();
        if opt.is_empty() {
            continue;
        }
        let (key, val) = opt.split_once('=').unwrap_or((opt, ""));
        let Some(&(_, canonical)) = KEYS.iter().find(|(k, _)| *k == key) else {
            let valid: Vec<&str> = KEYS.iter().map(|(k, _)| *k).collect();
            return Err(MountError::Key(format!(
                "unknown mount option {key}, must be one of: {}",
                valid.join(", ")
            )));
        };
        if canonical == "type" {
            groups.push(Vec::new());
        }
        let Some(cur) = groups.last_mut() else {
            return Err(MountError::Key(format!(
                "mount option `{opt}`: type must be specified first (e.g. type=bind,src=/a,dst=/b)"
            )));
        };
        cur.push((canonical, val.to_string()));
    }
    groups.iter().map(|g| to_mount(g, home)).collect()
}

fn to_mount(
    opts: &[(&'static str, String)],
    home: Option<&str>,
) -> std::result::Result<Mount, MountError> {
    let get = |k: &str| {
        opts.iter()
            .rev()
            .find(|(key, _)| *key == k)
            .map(|(_, v)| v.clone())
    };
    let typ = get("type").unwrap_or_default();
    let required = |k: &str| {
        get(k).filter(|v| !v.is_empty()).ok_or_else(|| {
            MountError::Key(format!(
                "mount of type={typ} is missing `{k}=` (e.g. type=bind,src=/a,dst=/b)"
            ))
        })
    };
    let read_only = get("readonly").is_some();
    match typ.as_str() {
        "bind" => {
            let mut src_path = required("src")?;
            if let (Some(home), Some(rest)) = (home, src_path.strip_prefix('~')) {
                src_path = format!("{home}{rest}");
            }
            Ok(Mount::Bind {
                src_path,
                dst_path: required("dst")?,
                read_only,
            })
        }
        "volume" => Ok(Mount::Volume {
            src: required("src")?,
            dst_path: required("dst")?,
            read_only,
        }),
        "device" => {
            let src_path = required("src")?;
            let dst_path = get("dst")
                .filter(|d| !d.is_empty())
                .unwrap_or_else(|| src_path.clone());
            let permissions = get("perm").unwrap_or_else(default_perm);
            if let Some(c) = permissions.chars().find(|c| !"rwm".contains(*c)) {
                return Err(MountError::Value(format!(
                    "device mount perm=`{permissions}`: `{c}` is not a valid permission flag, must be one of r,w,m"
                )));
            }
            Ok(Mount::Device {
                src_path,
                dst_path,
                permissions,
            })
        }
        other => Err(MountError::Value(format!(
            "invalid mount type `{other}`, must be one of: bind, volume, device"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Vec<Mount>> {
        let tokens: Vec<&str> = s.split(',').collect();
        parse_mounts(&tokens, Some("/home/u"))
    }

    #[test]
    fn all_kinds() {
        let m = parse("type=bind,src=~/a,dst=/b,readonly,type=volume,source=v,target=/c,type=device,src=/dev/fuse").unwrap();
        assert_eq!(
            m,
            vec![
                Mount::Bind {
                    src_path: "/home/u/a".into(),
                    dst_path: "/b".into(),
                    read_only: true
                },
                Mount::Volume {
                    src: "v".into(),
                    dst_path: "/c".into(),
                    read_only: false
                },
                Mount::Device {
                    src_path: "/dev/fuse".into(),
                    dst_path: "/dev/fuse".into(),
                    permissions: "rwm".into()
                },
            ]
        );
        let m = parse("type=device,src=/dev/a,dst=/dev/b,perm=r").unwrap();
        assert_eq!(
            m,
            vec![Mount::Device {
                src_path: "/dev/a".into(),
                dst_path: "/dev/b".into(),
                permissions: "r".into()
            }]
        );
    }

    #[test]
    fn errors() {
        let e = |s| parse(s).unwrap_err().to_string();
        assert_eq!(
            e("src=/a,type=bind"),
            "mount option `src=/a`: type must be specified first (e.g. type=bind,src=/a,dst=/b)"
        );
        assert_eq!(e("type=bind,foo=1"), "unknown mount option foo, must be one of: type, destination, dst, target, read_only, readonly, source, src, perm");
        assert_eq!(
            e("type=nfs,src=a,dst=b"),
            "invalid mount type `nfs`, must be one of: bind, volume, device"
        );
        assert_eq!(
            e("type=bind,src=/a"),
            "mount of type=bind is missing `dst=` (e.g. type=bind,src=/a,dst=/b)"
        );
        assert_eq!(
            e("type=device,src=/dev/a,perm=rx"),
            "device mount perm=`rx`: `x` is not a valid permission flag, must be one of r,w,m"
        );
    }
}
